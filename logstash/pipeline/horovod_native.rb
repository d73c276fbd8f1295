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

require "thread"

REFERENCE = /%\{(\w+)(?::([^:}]+))?(?::(int|float))?\}/
# Horovod's level letters (hvdlog/fields.py HOROVOD_LEVEL_LETTERS; a test checks they agree).
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
  @terminate = compile("HOROVOD_TERMINATE")
  @what = compile("HOROVOD_TERMINATE_WHAT")
  @chatter = compile("HOROVOD_CHATTER")
  @process_exit = compile("HOROVOD_PROCESS_EXIT")
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
  legacy = captures(@legacy, first)
  if legacy && (seconds = captures(@stall_header, legacy["message"]))
    stall(event, [legacy["message"]] + lines[1..], seconds["[horovod][stall][seconds]"], event.get("[size]"))
    event.set("[log][level]", "warning")
    event.set("[event][dataset]", "horovod.core")
  elsif match(@traceback, first)
    traceback(event, lines)
  elsif (found = captures(@terminate, first))
    event.set("[message]", lines.join("\n"))
    event.set("[error][type]", found["[error][type]"])
    what = lines[1..].map { |line| captures(@what, line) }.compact.first
    event.set("[error][message]", what["[error][message]"]) if what
    event.set("[log][level]", "critical")
  elsif (found = captures(@process_exit, first))
    found.each { |field, value| event.set(field, value) }
    event.set("[log][level]", found["[process][exit_code]"].zero? ? "info" : "error")
  else
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
      missing.concat((0...size.to_i).reject { |rank| ranks.include?(rank) }) if size
    end
  end
  fields = {}
  fields["[horovod][stall][tensors]"] = tensors.uniq unless tensors.empty?
  fields["[horovod][stall][missing_ranks]"] = missing.uniq.sort unless missing.empty?
  fields["[horovod][stall][ready_ranks]"] = ready.uniq.sort unless ready.empty?
  fields
end

def traceback(event, lines)
  text = lines.join("\n")
  last = lines.reverse.find { |line| !line.strip.empty? && !line.start_with?(" ", "\t") }
  found = captures(@exception, last.to_s)
  if found
    found.each { |field, value| event.set(field, value) }
  else
    event.set("[error][message]", last.to_s)
  end
  event.set("[message]", text)
  event.set("[error][stack_trace]", text)
  event.set("[log][level]", "error")
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
