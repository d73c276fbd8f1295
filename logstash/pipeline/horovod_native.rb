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

TRUNCATED_TAG = "_hvdlog_truncated"
# a scheduler's prefix is at most this long (hvdlog/parse/prefixes.py _LONGEST)
PREFIX_LONGEST = 170

def register(params)
  @definitions = load_definitions(params.fetch("patterns_file"))
  # The declared multi-line grammar and the bounds (hvdlog/parse/assets/blocks.json).
  blocks = JSON.parse(File.read(params.fetch("blocks_file"), encoding: "UTF-8"))
  @max_document_bytes = Integer(blocks.fetch("limits").fetch("max_document_bytes"))
  @max_pieces = Integer(blocks.fetch("limits").fetch("max_pieces"))
  load_grammar(blocks)
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
  @frame = compile("HOROVOD_TRACEBACK_FRAME")
  @lone_exception = compile("HOROVOD_LONE_EXCEPTION")
  @exception_more = compile("HOROVOD_EXCEPTION_MORE")
  @terminate = compile("HOROVOD_TERMINATE")
  @what = compile("HOROVOD_TERMINATE_WHAT")
  @chatter = compile("HOROVOD_CHATTER")
  @broken = compile("HOROVOD_BROKEN_LINE")
  @core_line = compile("HOROVOD_CORE_LINE")
  @scheduler_at = Regexp.new("\\G(?:#{compile("HOROVOD_SCHEDULER_PREFIX").regex.source})")
  # The message table (hvdlog/parse/assets/messages.json), shared with hvdlog.parse.messages.
  @messages = JSON.parse(File.read(params.fetch("messages_file"), encoding: "UTF-8")).fetch("messages").map do |row|
    compiled = compile(row.fetch("pattern"))
    raise ArgumentError, "#{row["pattern"]} must be anchored with \\A" unless compiled.regex.source.start_with?("\\A", "^")
    [compiled, row.fetch("dataset", "horovod.launcher"), row.fetch("fields", {}), row["pattern"], row["lacks"] && reference(row["lacks"]), row.fetch("net", false)].freeze
  end.freeze
  # Every line shape a block or a message begins with, as one regex (hvdlog/parse/prefixes.py
  # `_starts`): what an untagged event's first line must show behind a prefix no list names.
  # the safety net's row (net: true) matches any failure-shaped line: it says nothing of where a line starts
  known_rows = @messages.reject { |row| row[5] }
  @known_start = Regexp.union(@core_line.regex, *known_rows.map { |row| row[0].regex }, *known_openers)
  @stall_ops_line = compile("HOROVOD_STALL_OPS_LINE")
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
  # a core line's event: its first line lost the prefix in the conf, its other lines lose it here
  lines = unprefixed(event, lines) unless event.get("[horovod][launcher][format]") ||
                                          (event.get("[@metadata][hvd][level]") && !event.get("[@metadata][hvd][prefix]"))
  header = event.get("[@metadata][hvd][level]") && torn_header(lines.first.to_s)
  classify_all(header ? untorn(event, lines, header) : pieces_of(event, lines))
end

# The documents of one event's lines (its first line's core fields already set, if any).
def pieces_of(event, lines)
  first_state = nil
  if event.get("[@metadata][hvd][level]")
    first_state = stall_header?(event.get("message").to_s) ? :stall : :core
  end
  pieces = segments(lines, first_state)
  return bound(process(event, pieces.first || lines)) if pieces.length <= 1
  split(event, pieces, first_state)
end

# --- a prefix no list names (hvdlog/parse/prefixes.py) -----------------------------------

# An untagged event behind a prefix a scheduler, CI system or log viewer put before every line
# (compose's `trainer-1  | `, syslog's `... python3[4321]: `). hvdlog parse learns it from
# neighbouring lines; Logstash reads each event alone, so here it comes from the event itself:
# the prefix horovod-native.conf found before a core header, traceback header, signal line or
# Slurm error ([@metadata][hvd][prefix], proof on one line), or else the first line's shortest
# HOROVOD_SCHEDULER_PREFIX before a line the parser knows (unless the whole line is one), or
# else a later line's, when the first line starts with it too (Filebeat joined that line
# behind the prefix: Open MPI's `Process name:` under the box's unknown first lines).
# It leaves every line of the event that starts with it (digits may differ: times, counters).
def unprefixed(event, lines)
  prefix = event.get("[@metadata][hvd][prefix]")
  prefix = learned_prefix(lines.first.to_s) if prefix.nil? || prefix.empty?
  shape = prefix ? prefix_shape(prefix, lines[1..].find { |line| !line.strip.empty? }) : later_shape(lines)
  return lines unless shape
  stripped = lines.map { |line| (found = shape.match(line)) ? line[found.end(0)..] : line }
  event.set("[message]", stripped.join("\n")) unless event.get("[@metadata][hvd][level]")  # a core line's is the conf's
  stripped
end

# The shape of the first prefix a later line shows before a line the parser knows, that the
# first line starts with too (nil: none). Only an event whose first line has a prefix's shape
# and is not known as it stands; only its first LATER_LINES lines after it (a block behind a
# prefix shows a known line early: a stall report of 4,096 ranks is not searched).
LATER_LINES = 16

def later_shape(lines)
  first = lines.first.to_s
  return nil if lines.length < 2 || !@scheduler_at.match?(first, 0) || known_start?(first)
  lines[1, LATER_LINES].each do |line|
    prefix = learned_prefix(line)
    shape = prefix && agreeing_shape(prefix, lines.first)
    return shape if shape
  end
  nil
end

# The prefix's shape (digits vary) that the event's next line starts with too, if any: the
# prefix's blanks may have taken the first line's own leading blanks (` WARNING: ...`), so
# fewer are tried (hvdlog/parse/prefixes.py `_agreeing`); with no such line, the whole prefix.
def prefix_shape(prefix, neighbour)
  (neighbour && agreeing_shape(prefix, neighbour)) || shapes_of(prefix).first
end

def agreeing_shape(prefix, neighbour)
  shapes_of(prefix).find { |shape| shape.match?(neighbour) }
end

def shapes_of(prefix)
  prefix.length.downto(prefix.rstrip.length + 1).map do |keep|
    Regexp.new("\\A" + Regexp.escape(prefix[0, keep]).gsub(/\d+/) { "\\d+" })
  end
end

def learned_prefix(line)
  return nil if line.empty? || line.start_with?(" ", "\t") || !@scheduler_at.match?(line, 0) || known_start?(line)
  position = 0
  while (found = @scheduler_at.match(line, position)) && found.end(0) <= PREFIX_LONGEST && found.end(0) > position
    position = found.end(0)
    return line[0, position] if known_start?(line[position..])
  end
  nil
end

# A line the parser knows as it stands (hvdlog/parse/prefixes.py `known_start`): a row, a
# block's first line, the core line, or a stall report's tensor line.
def known_start?(text)
  @known_start.match?(text) || (text.include?("ranks: ") && match(@stall_ops_line, text))
end

# The first lines of blocks.json's openers, each anchored (hvdlog/parse/prefixes.py `_starts`):
# not a code line's, nor one that needs the lines around it.
def known_openers
  @opens.reject { |opener| opener.state == :code || !opener.tests.empty? }.map do |opener|
    next /\A#{Regexp.escape(opener.contains)}/ if opener.contains
    /\A(?=#{Regexp.escape(opener.prefix)})(?:#{opener.pattern.regex})/ if opener.pattern
  end.compact
end

# --- a core line torn by the other thread (hvdlog/parse/native.py `_torn`) ---------------

# Horovod's two threads share stderr: `[hdr1] [hdr2] whole line of the other thread`, then the
# first line's rest on the next line (`[1]: Horovod initialized`), which Filebeat's `match:
# before` joins to it. The outer header when `line` is such a line (no rank prefix between
# the headers, the inner line a whole core line), else nil.
def torn_header(line)
  outer = line.start_with?("[") && captures(@core_line, line)
  return nil unless outer && !outer.key?("[rank]") && outer["message"].start_with?("[") && match(@core_line, outer["message"])
  line[0, line.length - outer["message"].length]
end

# The inner line as it is, then the outer header before the next line when that one has no
# header of its own (hvdlog parse holds the header for it); each read as its own event.
def untorn(event, lines, header)
  event.remove("[@metadata][hvd][block]")
  event.remove("message")
  PER_EVENT_FIELDS.each { |field| event.remove(field) }
  rest = lines[1..]
  rest[0] = header + rest[0] if rest.first && !match(@core_line, rest.first)
  inner = [lines.first[header.length..]]
  template = rest.empty? ? nil : event.clone  # before the inner line's fields: lean, as in split
  results = pieces_of(grokked(event, inner), inner)
  results.concat(pieces_of(grokked(template, rest), rest)) if template
  results
end

# An event of `lines` with what horovod-native.conf's core-line grok gives for their first line.
def grokked(event, lines)
  event.set("[message]", lines.join("\n"))
  (captures(@core_line, lines.first) || {}).each { |field, value| event.set(field == "message" ? "[message]" : field, value) }
  event
end

# Filebeat joined lines that hvdlog parse reads as several documents (a headless traceback
# after a print, a stall header after a space, lines after a plain core line): one event each.
# Memory stays linear in the block: the block and the whole message leave the event BEFORE
# it is cloned (LogStash::Event#clone deep-copies every field, @metadata too), so each clone
# is the lean event plus its own piece. At most max_pieces events leave; the rest are
# summarised in the last one, counted (docs/reliability.md).
def split(event, pieces, first_state)
  event.remove("[@metadata][hvd][block]")
  message = first_state ? event.get("message") : nil
  event.remove("message")
  template = event.clone
  PER_EVENT_FIELDS.each { |field| template.remove(field) }
  event.set("message", message) if first_state
  kept = pieces.length > @max_pieces ? pieces.first(@max_pieces - 1) : pieces
  results = kept.each_with_index.flat_map do |piece_lines, index|
    next bound(process(event, piece_lines)) if index.zero? && first_state
    piece = template.clone
    piece.set("[message]", piece_lines.join("\n"))
    bound(process(piece, piece_lines))
  end
  results.concat(summary(template.clone, pieces.drop(@max_pieces - 1))) if pieces.length > @max_pieces
  results
end

# One event standing for the pieces past the cap: their lines up to the byte cap, and how
# many documents, lines and bytes it stands for.
def summary(event, rest)
  lines = rest.flatten
  event.set("[message]", lines.join("\n"))
  event.set("[event][dataset]", "horovod.launcher")
  event.set("[log][level]", "warning")
  event.set("[hvdlog][truncated][documents]", rest.length)
  event.tag(TRUNCATED_TAG)
  bound([event])
  [event]
end

# Each event's message (and error.stack_trace, error.message) cut to max_document_bytes at
# a line end, as hvdlog/parse/blocks.py cuts hvdlog parse's: the cut lines are counted.
def bound(events)
  events.each do |event|
    cut = nil
    %w[[message] [error][stack_trace] [error][message]].each do |field|
      text = event.get(field)
      next unless text.is_a?(String) && text.bytesize > @max_document_bytes
      kept, lines, bytes = cut_text(text, @max_document_bytes)
      event.set(field, kept)
      cut ||= [lines, bytes] if field == "[message]"
    end
    next unless cut
    event.set("[hvdlog][truncated][lines]", cut[0])
    event.set("[hvdlog][truncated][bytes]", cut[1])
    event.tag(TRUNCATED_TAG)
  end
end

# [the first whole lines of `text` within `limit` bytes (or its first `limit` bytes when
# its first line is longer) + the cut mark, lines not kept whole, bytes cut]
def cut_text(text, limit)
  head = text.byteslice(0, limit + 1).scrub("")
  stop = head.rindex("\n")
  kept = stop && stop.positive? ? head[0, stop] : text.byteslice(0, limit).scrub("")
  rest = text.byteslice(kept.bytesize, text.bytesize - kept.bytesize)
  lines = rest.count("\n") + (rest.start_with?("\n") ? 0 : 1)
  ["#{kept}\n... [hvdlog: #{lines} lines (#{rest.bytesize} bytes) cut]", lines, rest.bytesize]
end

# --- where hvdlog parse (hvdlog/parse/native.py) starts a new document ------------------

# Fields of the first line's grok that a later document of the same block must not inherit.
PER_EVENT_FIELDS = %w[[@metadata][hvd][level] [@metadata][hvd][time] [log][origin]].freeze

# --- the declared grammar (hvdlog/parse/assets/blocks.json), read like hvdlog/parse/blocks.py

Rule = Struct.new(:name, :tests, :then_state, :pattern, :action)
Opener = Struct.new(:name, :pattern, :prefix, :contains, :tests, :state, :action)

def condition(spec)
  case spec
  when "indented" then ->(line, _previous, _blank) { line.start_with?(" ", "\t") }
  when "blank" then ->(line, _previous, _blank) { line.strip.empty? }
  when "no_blank_before" then ->(_line, _previous, blank) { !blank }
  else
    if spec.key?("previous")
      before = compile(spec["previous"])
      ->(_line, previous, _blank) { match(before, previous) }
    elsif spec["lstrip"]
      pattern = compile(spec.fetch("match"))
      ->(line, _previous, _blank) { match(pattern, line.sub(/\A +/, "")) }
    else
      pattern = compile(spec.fetch("match"))
      ->(line, _previous, _blank) { match(pattern, line) }
    end
  end
end

def load_grammar(blocks)
  @states = blocks.fetch("states").transform_values do |rows|
    rows.map do |row|
      named = row["when"].find { |spec| spec.is_a?(Hash) && spec.key?("match") }
      Rule.new(row["name"], row["when"].map { |spec| condition(spec) }, row["then"].to_sym, named && compile(named["match"]),
               row["action"]).freeze
    end.freeze
  end.transform_keys(&:to_sym).freeze
  @opens = blocks.fetch("opens").map do |row|
    Opener.new(row["name"], row["pattern"] && compile(row["pattern"]), row.fetch("prefix", ""), row["contains"],
               row.fetch("when", []).map { |spec| condition(spec) }, row["state"].to_sym, row["action"]).freeze
  end.freeze
  @classify = blocks.fetch("classify").to_h do |state, rows|
    [state.to_sym, rows.map { |row| [compile(row.fetch("pattern")), row.fetch("fields")].freeze }.freeze]
  end.freeze
end

# The rule of `state` that `line` satisfies (nil: the document ends before it).
def step(state, line, previous, blank_before)
  (@states[state] || []).find { |rule| rule.tests.all? { |test| test.call(line, previous, blank_before) } }
end

# The first opener of blocks.json `opens` that `line` satisfies, or nil.
def opener_of(line)
  @opens.find do |opener|
    next false unless line.start_with?(opener.prefix)
    next false if opener.contains && !line.include?(opener.contains)
    next false if opener.pattern && !match(opener.pattern, opener.contains ? line[line.index(opener.contains)..] : line)
    opener.tests.all? { |test| test.call(line, "", false) }
  end
end

# The state a line opens (nil: a document of its own).
def opening(line)
  found = opener_of(line)
  return nil unless found
  return found.state unless found.contains
  # <= v0.16's bare `WARNING: ` header, also after a space or glued to progress output
  legacy = captures(found.pattern, line[line.index(found.contains)..])
  legacy && captures(@stall_header, legacy["message"]) ? found.state : nil
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
    rule = current && state && step(state, line, current.last, !blanks.empty?)
    if rule && rule.then_state == :hold
      blanks << line
      next
    elsif rule
      current.concat(blanks) << line
      state = rule.then_state
      blanks = []
      next
    end
    blanks = []
    if line.strip.empty?
      current = nil
      next
    end
    current = [line]
    result << current
    state = opening(line)
  end
  result
end

def process(event, lines)
  letter = event.get("[@metadata][hvd][level]")
  letter ? core_event(event, lines, letter) : launcher_event(event, lines)
end

# A document whose first line is a Horovod core line (grok set its level letter).
def core_event(event, lines, letter)
  event.set("[log][level]", LEVELS.fetch(letter))
  event.set("[event][dataset]", "horovod.core")
  message = event.get("message").to_s
  return chatter(event, message) if %w[T D].include?(letter)
  seconds = captures(@stall_header, message)
  if seconds || cut_header?(message)
    stall(event, [message] + lines[1..], seconds && seconds["[horovod][stall][seconds]"], event.get("[size]"))
  elsif match(@ops_line, message)
    op_fields(message, event.get("[size]")).each { |field, value| event.set(field, value) }
    mark_stall(event, false)
  elsif lines[1..].any? { |line| !line.strip.empty? }
    # Filebeat joined lines to this one (indented, `Error:`-like): grok kept only the
    # first line's text in message; keep the rest too, nothing is dropped.
    event.set("[message]", ([message] + lines[1..]).join("\n"))
  end
  [event]
end

# Any other document: a stall of the oldest format, a traceback, Hydra's box, terminate, a
# message-table line, or a line kept raw and tagged.
def launcher_event(event, lines)
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
  elsif match(@ranks_title, first) || match(@ops_title, first)
    # `Missing ranks:` (`Stalled ranks:`, `Stalled ops:`) whose header line was lost (a capture
    # or scrollback that starts in it): the lines after it still name the ranks
    stall(event, lines, nil, event.get("[size]"))
    event.set("[log][level]", "warning")
    event.set("[event][dataset]", "horovod.core")
  elsif headless_stall(event, first)
    # a per-tensor stall line whose header was lost: still a stall report of those ranks
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
    classify(event, :terminate)
  elsif (known = recognise(first, event))
    known.each { |field, value| event.set(field, value) }
    event.set("[message]", lines.join("\n"))
  else
    # blank lines Filebeat joined at the end carry nothing (hvdlog parse skips them)
    event.set("[message]", lines.join("\n"))
    # a print is a launcher line; only a torn or garbled line is a parse failure (HOROVOD_BROKEN_LINE)
    event.tag("_hvdlog_parse_failure") if match(@broken, first)
  end
  [event]
end

# --- the kinds of events ---------------------------------------------------------------

# blocks.json `classify`: the first row whose pattern the finished block's error.message matches
# adds its captures and fields (a scale-down's terminate is an expected exit).
def classify(event, state)
  message = event.get("[error][message]")
  return unless message.is_a?(String)
  (@classify[state] || []).each do |pattern, fields|
    found = captures(pattern, message)
    next unless found
    found.each { |field, value| event.set(field, value) unless field.start_with?("[@metadata]") }
    fields.each { |name, value| event.set(reference(name), value) }
    return
  end
end


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
      names = readable_names(line, rank["[@metadata][hvd][stall_tensors]"])
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
# hvdlog/parse/native.py: the grammar (blocks.json) walked again over the document's lines,
# the last line a rule with the `exception` action took (a chained traceback's own comes
# after the first's); frames without their indentation are frames, not the exception.
def exception_line(lines)
  opener = opener_of(lines.first.to_s)
  return nil unless opener
  found = opener.action == "exception" ? 0 : nil
  state = opener.state
  previous = lines.first
  blank = false
  lines.each_with_index do |line, index|
    next if index.zero?
    rule = step(state, line, previous, blank)
    break unless rule
    if rule.then_state == :hold
      blank = true
      next
    end
    found = index if rule.action == "exception"
    state, previous, blank = rule.then_state, line, false
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

# Field references => values for the first table row `line` matches, or nil (`event`: the
# line's own, for rows that apply only where it lacks a field, as hvdlog/parse/messages.py).
def recognise(line, event = nil)
  @messages.each do |compiled, dataset, specs, _name, lacks, _net|
    next if lacks && event && !event.get(lacks).nil?
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

# --- failure evidence: the table's evidence rules, applied like hvdlog/parse/evidence_rules.py -------

EVIDENCE_LEVELS = %w[warning error critical].freeze

EvidenceRule = Struct.new(:kind, :source, :pattern, :when, :has, :rank, :any_level, :lacks)

def load_evidence(path)
  JSON.parse(File.read(path, encoding: "UTF-8")).fetch("evidence", []).map do |row|
    pattern = row["pattern"] && compile(row["pattern"])
    when_fields = row.fetch("when", {}).map { |name, values| [reference(name), values] }
    EvidenceRule.new(row.fetch("kind"), row.fetch("source"), pattern, when_fields, row["has"] && reference(row["has"]),
                     row["rank"] && reference(row["rank"]), row.fetch("any_level", false),
                     row["lacks"] && reference(row["lacks"])).freeze
  end.freeze
end

# hvdlog.evidence.kind/.source/.rank of the first rule an event matches (none: no evidence).
def classify_all(events)
  events.each do |event|
    severe = EVIDENCE_LEVELS.include?(event.get("[log][level]"))
    @evidence.each do |rule|
      next unless rule.any_level || severe
      next if rule.has && event.get(rule.has).nil?
      next if rule.lacks && !event.get(rule.lacks).nil?
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

# --- line repairs (mirror hvdlog/parse/stalls.py and native.py) ------------------------

# The stall header's words up to its number: a header a terminal wrapped is a prefix of them.
HEADER_WORDS = "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks " \
               "and are waiting for remainder of ranks for more than ".freeze

def stall_header?(message)
  captures(@stall_header, message) || cut_header?(message)
end

# A stall header a terminal wrapped mid-word (the rest went to the next physical line).
def cut_header?(message)
  stem = message.sub(/[0-9.]+\z/, "")
  message.length >= "One or more".length && HEADER_WORDS.start_with?(stem)
end

# The names of a `<rank>: [t1, t2 ...]` line that can be read: no ` ...`, and on a line cut
# short (`1: [t1, t2, t`) not the last, partial name.
def readable_names(line, names)
  return names.delete_suffix(" ...") if line.end_with?("]")
  cut = names.rindex(", ")
  cut ? names[0...cut] : ""
end

# `<tensor> [missing ranks: 0, 1, 3]` alone (its header lost): a stall report of those ranks.
def headless_stall(event, line)
  return false unless line.include?("ranks: ") && match(@ops_line, line.lstrip)
  op_fields(line.strip, event.get("[size]")).each { |field, value| event.set(field, value) }
  mark_stall(event, false)
  event.set("[message]", line.strip)
  event.set("[log][level]", "warning")
  event.set("[event][dataset]", "horovod.core")
  true
end
