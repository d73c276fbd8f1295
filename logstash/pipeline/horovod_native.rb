# Multi-line native events for the horovod-native pipeline (a Logstash ruby filter script):
# stall warnings of every generation -> horovod.stall.*, Python tracebacks and C++
# `terminate` -> error.*, and the per-cycle TRACE/DEBUG chatter switch.
#
# It mirrors hvdlog/parse/stalls.py and native.py, and takes its regexes from the same
# grok pattern file (hvdlog/parse/assets/patterns/horovod), expanded here the way hvdlog's Python
# loader does, so a pattern changes in one place.
#
# Input (set by horovod-native.conf): [@metadata][hvd][block] = the event's lines with
# arrival times and launcher tags removed; [message] = the C++ message when the first line
# is a core line; [@metadata][hvd][level] = its level letter. Sets [log][level] and
# [event][dataset] of every event.
#
# Concurrency: Logstash creates ONE instance of this filter per pipeline and every pipeline
# worker calls filter() on it at the same time (the semantics of `concurrency :shared`).
# register() builds only read-only state; the one mutable state, the chatter sampling
# counters (per rank, stream and file, like `hvdlog parse`), is guarded by a Mutex.

require "json"
require "thread"

REFERENCE = /%\{(\w+)(?::([^:}]+))?(?::(int|float))?\}/
# Horovod's level letters (hvdlog/fields.py HOROVOD_LEVEL_LETTERS; a test checks they agree).
LEGACY_STALL_MARK = "WARNING: One or more tensors"
LEVELS = { "T" => "trace", "D" => "debug", "I" => "info", "W" => "warning", "E" => "error", "F" => "critical" }.freeze

def register(params)
  @definitions = load_definitions(params.fetch("patterns_file"))
  @stall_header = compile("HOROVOD_STALL_HEADER")
  @legacy = compile("HOROVOD_STALL_LEGACY_LINE")
  @ranks_title = compile("HOROVOD_STALL_RANKS_TITLE")
  @rank = compile("HOROVOD_STALL_RANK")
  @shutdown = compile("HOROVOD_STALL_SHUTDOWN")
  @ops_title = compile("HOROVOD_STALL_OPS_TITLE")
  @ops_line = compile("HOROVOD_STALL_OPS_LINE")
  @op = compile("HOROVOD_STALL_OP")
  @traceback = compile("HOROVOD_TRACEBACK_START")
  @exception = compile("HOROVOD_EXCEPTION_LINE")
  @chain = compile("HOROVOD_TRACEBACK_CHAIN")
  @frame = compile("HOROVOD_TRACEBACK_FRAME")
  @lone_exception = compile("HOROVOD_LONE_EXCEPTION")
  @exception_more = compile("HOROVOD_EXCEPTION_MORE")
  @terminate = compile("HOROVOD_TERMINATE")
  @what = compile("HOROVOD_TERMINATE_WHAT")
  @chatter = compile("HOROVOD_CHATTER")
  # The message table (hvdlog/parse/assets/messages.json), shared with hvdlog.parse.messages.
  @messages = JSON.parse(File.read(params.fetch("messages_file"), encoding: "UTF-8")).fetch("messages").map do |row|
    compiled = compile(row.fetch("pattern"))
    raise ArgumentError, "#{row["pattern"]} must be anchored with \\A" unless compiled.regex.source.start_with?("\\A", "^")
    [compiled, row.fetch("dataset", "horovod.launcher"), row.fetch("fields", {}), row["pattern"]].freeze
  end.freeze
  # signal number -> name: the map of mpirun's row (Hydra's box uses it too)
  @signal_names = @messages.find { |row| row[3] == "HOROVOD_MPIRUN_SIGNAL" }[2].fetch("event.reason").fetch("map")
  @evidence = load_evidence(params.fetch("messages_file"))
  @hydra_rank = compile("HOROVOD_HYDRA_RANK")
  @hydra_end = compile("HOROVOD_HYDRA_END")
  setting = params.fetch("chatter", "keep").to_s
  @chatter_every = case setting
                   when "keep" then nil
                   when "drop" then 0
                   when /\A(?:sample=)?([1-9]\d*)\z/ then Regexp.last_match(1).to_i
                   else raise ArgumentError, "HVDLOG_CHATTER must be keep, drop or sample=N, not #{setting.inspect}"
                   end
  @chatter_seen = Hash.new(0)
  @chatter_lock = Mutex.new
end

def filter(event)
  block = event.get("[@metadata][hvd][block]").to_s
  lines = block.split("\n", -1)
  lines.pop while lines.length > 1 && lines.last.strip.empty?
  first_state = nil
  if event.get("[@metadata][hvd][level]")
    first_state = captures(@stall_header, event.get("message").to_s) ? :stall : :single
  end
  pieces = segments(lines, first_state)
  return classify_all(process(event, pieces.first || lines)) if pieces.length <= 1
  # Filebeat joined lines that hvdlog parse reads as several documents (a headless traceback
  # after a print, a stall header after a space, lines after a plain core line): one event each.
  classify_all(pieces.each_with_index.flat_map do |piece_lines, index|
    next process(event, piece_lines) if index.zero? && first_state
    piece = event.clone
    PER_EVENT_FIELDS.each { |field| piece.remove(field) }
    piece.set("[message]", piece_lines.join("\n"))
    process(piece, piece_lines)
  end)
end

# --- where hvdlog parse (hvdlog/parse/native.py) starts a new document ------------------

# Fields of the first line's grok that a later document of the same block must not inherit.
PER_EVENT_FIELDS = %w[[@metadata][hvd][level] [@metadata][hvd][time] [log][origin]].freeze
# States in which blank lines may be inside the document (a traceback's).
HOLDS_BLANKS = %i[traceback exception call_stack chain].freeze

# What a line opens when it starts a document.
def opening(line)
  mark = line.index(LEGACY_STALL_MARK)
  legacy = mark && captures(@legacy, line[mark..])
  return :stall if legacy && captures(@stall_header, legacy["message"])
  return :traceback if match(@traceback, line) || match(@frame, line)
  return :exception if match(@lone_exception, line)
  return :terminate if match(@terminate, line)
  return :hydra if match(@hydra_rank, line)
  :single
end

def stall_line?(line)
  match(@ranks_title, line) || match(@rank, line) || match(@shutdown, line) || match(@ops_title, line) ||
    match(@ops_line, line.lstrip)
end

# [whether `line` continues a document in `state`, the state after it]
def continues(state, line, previous, blank_before)
  case state
  when :stall then [stall_line?(line), :stall]
  when :terminate then [match(@what, line), :terminate]
  when :hydra then [match(@hydra_end, line), :single]
  when :traceback then [true, line.start_with?(" ", "\t") ? :traceback : :exception]
  when :chain then [match(@traceback, line), :traceback]
  when :exception, :call_stack
    return [true, :chain] if match(@chain, line)
    return [true, :call_stack] if state == :call_stack && !blank_before && line.match?(/\A[A-Za-z_]\w*\z/)
    if line.start_with?(" ", "\t") || match(@exception_more, line) || (previous.start_with?("Node: ") && !blank_before)
      return [true, line.start_with?("Function call stack:") ? :call_stack : :exception]
    end
    [false, nil]
  else [false, nil]
  end
end

# The block's lines cut into the documents hvdlog parse makes of them; blank lines between
# documents are dropped, as hvdlog parse drops them.
def segments(lines, first_state)
  result = []
  current = nil
  state = nil
  blanks = []
  lines.each_with_index do |line, index|
    if index.zero? && first_state
      current = [line]
      result << current
      state = first_state
      next
    end
    if line.strip.empty?
      if current && HOLDS_BLANKS.include?(state)
        blanks << line
      else
        current = nil
      end
      next
    end
    if current
      ok, following = continues(state, line, current.last, !blanks.empty?)
      if ok
        current.concat(blanks) << line
        state = following
        blanks = []
        next
      end
    end
    blanks = []
    current = [line]
    result << current
    state = opening(line)
    # a frame's code line whose `File` line was cut off (rotation, scrollback): a traceback if a frame follows
    state = :traceback if state == :single && line.start_with?(" ", "\t") && lines[index + 1] && match(@frame, lines[index + 1])
  end
  result
end

def process(event, lines)
  letter = event.get("[@metadata][hvd][level]")
  if letter
    event.set("[log][level]", LEVELS.fetch(letter))
    event.set("[event][dataset]", "horovod.core")
    message = event.get("message").to_s
    if %w[T D].include?(letter)
      return chatter(event, message)
    end
    seconds = captures(@stall_header, message)
    if seconds
      stall(event, [message] + lines[1..], seconds["[horovod][stall][seconds]"], event.get("[size]"))
    elsif match(@ops_line, message)
      op_fields(message, event.get("[size]")).each { |field, value| event.set(field, value) }
      mark_stall(event, false)
    elsif lines[1..].any? { |line| !line.strip.empty? }
      # Filebeat joined lines to this one (indented, `Error:`-like): grok kept only the
      # first line's text in message; keep the rest too, nothing is dropped.
      event.set("[message]", ([message] + lines[1..]).join("\n"))
    end
    return [event]
  end
  event.set("[event][dataset]", "horovod.launcher")
  event.set("[log][level]", "info")
  first = lines.first.to_s
  # <= v0.16's bare `WARNING: ` header, also after a space or glued to progress output
  mark = first.index(LEGACY_STALL_MARK)
  legacy = mark && captures(@legacy, first[mark..])
  if legacy && (seconds = captures(@stall_header, legacy["message"]))
    stall(event, lines, seconds["[horovod][stall][seconds]"], event.get("[size]"))
    event.set("[log][level]", "warning")
    event.set("[event][dataset]", "horovod.core")
  elsif match(@traceback, first) || match(@frame, first) || match(@lone_exception, first) ||
        (first.start_with?(" ", "\t") && lines[1] && match(@frame, lines[1]))
    # a traceback, one whose header was lost (frames first, or a frame's code line first: the
    # cut fell inside a frame), or an exception line alone
    traceback(event, lines)
  elsif (found = captures(@hydra_rank, first))
    # MPICH/Intel MPI's box: `=   RANK N PID P RUNNING AT host` then how it ended
    found.each { |field, value| event.set(field, value) }
    ending = lines[1] && captures(@hydra_end, lines[1])
    if ending
      number = ending.delete("[@metadata][hvd][signal_number]")
      ending.each { |field, value| event.set(field, value) }
      event.set("[event][reason]", @signal_names[number.to_s]) if @signal_names.key?(number.to_s)
    end
    event.set("[message]", lines.join("\n"))
    event.set("[log][level]", "error")
  elsif (found = captures(@terminate, first))
    event.set("[message]", lines.join("\n"))
    event.set("[error][type]", found["[error][type]"])
    what = lines[1..].map { |line| captures(@what, line) }.compact.first
    event.set("[error][message]", what["[error][message]"]) if what
    event.set("[log][level]", "critical")
  elsif (known = recognise(first))
    known.each { |field, value| event.set(field, value) }
    event.set("[message]", lines.join("\n"))
  else
    # blank lines Filebeat joined at the end carry nothing (hvdlog parse skips them)
    event.set("[message]", lines.join("\n"))
    event.tag("_hvdlog_parse_failure")
  end
  [event]
end

# --- the kinds of events ---------------------------------------------------------------

def chatter(event, message)
  return [event] if @chatter_every.nil? || !match(@chatter, message)
  return [] if @chatter_every.zero?
  key = [event.get("[rank]"), event.get("[horovod][launcher][stream]"), event.get("[log][file][path]")]
  seen = @chatter_lock.synchronize { @chatter_seen[key] += 1 }
  (seen - 1) % @chatter_every == 0 ? [event] : []
end

def stall(event, lines, seconds, size)
  event.set("[message]", lines.join("\n"))
  mark_stall(event, false)
  event.set("[horovod][stall][seconds]", seconds) unless seconds.nil?
  missing = []
  marked = []
  tensors = []
  lines[1..].each do |line|
    if (rank = captures(@rank, line))
      number = rank["[@metadata][hvd][stall_rank]"]
      missing << number
      marked << number if rank["[@metadata][hvd][stall_mark]"]
      names = rank["[@metadata][hvd][stall_tensors]"].delete_suffix(" ...")
      tensors.concat(names.split(", ").reject(&:empty?))
    elsif match(@shutdown, line)
      event.set("[horovod][stall][shutdown]", true)
    end
  end
  if missing.empty?
    op_fields(lines.join("\n"), size).each { |field, value| event.set(field, value) }
  else
    event.set("[horovod][stall][missing_ranks]", missing.uniq.sort)
    event.set("[horovod][stall][tensors]", tensors.uniq)
    event.set("[horovod][stall][shutdown_ranks]", marked.uniq.sort) unless marked.empty?
  end
end

def mark_stall(event, shutdown)
  event.set("[event][action]", "stall")
  event.set("[horovod][stall][source]", "inspector")
  event.set("[horovod][stall][shutdown]", shutdown)
end

def op_fields(text, size)
  tensors = []
  missing = []
  ready = []
  scan(@op, text).each do |op|
    tensors << op["[@metadata][hvd][stall_tensor]"]
    ranks = op["[@metadata][hvd][stall_ranks]"].delete(" ").split(",").map(&:to_i)
    if op["[@metadata][hvd][stall_kind]"] == "missing"
      missing.concat(ranks)
    else
      ready.concat(ranks)
      # size unknown: the ranks below the highest ready one that are not ready (a lower bound)
      upto = size ? size.to_i : ranks.max.to_i
      missing.concat((0...upto).reject { |rank| ranks.include?(rank) })
    end
  end
  fields = {}
  fields["[horovod][stall][tensors]"] = tensors.uniq unless tensors.empty?
  fields["[horovod][stall][missing_ranks]"] = missing.uniq.sort unless missing.empty?
  fields["[horovod][stall][ready_ranks]"] = ready.uniq.sort unless ready.empty?
  fields
end

# The exception line of a (possibly chained, possibly headless) traceback, read like
# hvdlog/parse/native.py: after the header and frames, the first other line is the
# exception; what follows continues its message, until a chain notice and a new traceback.
def exception_line(lines)
  state = :frames
  found = nil
  lines.each_with_index do |line, index|
    case state
    when :frames
      next if line.strip.empty? || line.start_with?(" ", "\t") || match(@traceback, line)
      found = index
      state = :message
    when :message
      state = :chain if match(@chain, line)
    when :chain
      state = :frames if match(@traceback, line)
    end
  end
  found
end

def traceback(event, lines)
  text = lines.join("\n")
  at = exception_line(lines)
  last = at && lines[at]
  found = last && captures(@exception, last)
  if found
    found.each { |field, value| event.set(field, value) }
  elsif last
    event.set("[error][message]", last)
  end
  # TF & co.: the exception's message goes on after its line
  more = at ? lines[(at + 1)..] : []
  if !more.empty? && event.get("[error][message]")
    event.set("[error][message]", ([event.get("[error][message]")] + more).join("\n"))
  end
  event.set("[message]", text)
  event.set("[error][stack_trace]", text)
  event.set("[log][level]", "error")
end

# --- the message table, read like hvdlog/parse/messages.py -------------------------------

def reference(dotted)
  "[#{dotted.split(".").join("][")}]"
end

# Field references => values for the first table row `line` matches, or nil.
def recognise(line)
  @messages.each do |compiled, dataset, specs, _name|
    found = captures(compiled, line)
    next if found.nil?
    fields = found.reject { |field, _| field.start_with?("[@metadata]") }
    specs.each do |name, spec|
      value = if spec.is_a?(Hash)
                source = found[reference(spec["from"])]
                source.nil? ? spec["default"] : spec["map"].fetch(source.to_s, spec["default"])
              else
                spec
              end
      fields[reference(name)] = value unless value.nil?
    end
    fields["[event][dataset]"] = dataset
    fields["[log][level]"] ||= "info"
    return fields
  end
  nil
end

# --- failure evidence: the table's evidence rules, applied like hvdlog/parse/evidence.py -------

EVIDENCE_LEVELS = %w[warning error critical].freeze

EvidenceRule = Struct.new(:kind, :source, :pattern, :when, :has, :rank, :any_level)

def load_evidence(path)
  JSON.parse(File.read(path, encoding: "UTF-8")).fetch("evidence", []).map do |row|
    pattern = row["pattern"] && compile(row["pattern"])
    when_fields = row.fetch("when", {}).map { |name, values| [reference(name), values] }
    EvidenceRule.new(row.fetch("kind"), row.fetch("source"), pattern, when_fields, row["has"] && reference(row["has"]),
                     row["rank"] && reference(row["rank"]), row.fetch("any_level", false)).freeze
  end.freeze
end

# hvdlog.evidence.kind/.source/.rank of the first rule an event matches (none: no evidence).
def classify_all(events)
  events.each do |event|
    severe = EVIDENCE_LEVELS.include?(event.get("[log][level]"))
    @evidence.each do |rule|
      next unless rule.any_level || severe
      next if rule.has && event.get(rule.has).nil?
      next unless rule.when.all? { |name, values| values.include?(event.get(name)) }
      found = {}
      if rule.pattern
        message = event.get("[message]")
        found = message.is_a?(String) && captures(rule.pattern, message)
        next unless found
      end
      event.set("[hvdlog][evidence][kind]", rule.kind)
      event.set("[hvdlog][evidence][source]", rule.source)
      if rule.rank
        rank = found.key?(rule.rank) ? found[rule.rank] : event.get(rule.rank)
        event.set("[hvdlog][evidence][rank]", rank) if rank.is_a?(Integer) && rank >= 0
      end
      break
    end
  end
end

# --- the pattern file, expanded like hvdlog/parse/patterns.py --------------------------

Compiled = Struct.new(:regex, :captures)

def load_definitions(path)
  definitions = {}
  File.foreach(path, encoding: "UTF-8") do |line|
    line = line.chomp
    next if line.strip.empty? || line.lstrip.start_with?("#")
    raise ArgumentError, "#{path}: trailing blank in #{line.inspect}; write it as [ ]" if line != line.rstrip
    found = /\A\s*([A-Za-z0-9_]+)\s+(.*\S)\z/.match(line) or raise ArgumentError, "#{path}: bad pattern line #{line.inspect}"
    definitions[found[1]] = found[2]
  end
  definitions
end

def compile(name)
  captures = []
  expand = lambda do |pattern_name|
    source = @definitions.fetch(pattern_name) { raise ArgumentError, "unknown grok pattern %{#{pattern_name}}" }
    source.gsub(REFERENCE) do
      reference = Regexp.last_match
      inner = expand.call(reference[1])
      if reference[2]
        group = "g#{captures.length}"
        captures << [group, reference[2], reference[3]]
        "(?<#{group}>#{inner})"
      else
        "(?:#{inner})"
      end
    end
  end
  # Regexp::MULTILINE, as Logstash's grok compiles the same patterns (`.` matches a newline).
  Compiled.new(Regexp.new(expand.call(name), Regexp::MULTILINE).freeze, captures.freeze).freeze
end

def fields_of(compiled, found)
  fields = {}
  compiled.captures.each do |group, field, type|
    value = found[group]
    next if value.nil?
    value = type == "int" ? value.to_i : type == "float" ? value.to_f : value
    fields[field] = fields.key?(field) ? [fields[field], value].flatten : value
  end
  fields
end

def match(compiled, text)
  compiled.regex.match?(text)
end

def captures(compiled, text)
  found = compiled.regex.match(text)
  found && fields_of(compiled, found)
end

def scan(compiled, text)
  results = []
  text.scan(compiled.regex) { results << fields_of(compiled, Regexp.last_match) }
  results
end
