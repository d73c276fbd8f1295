# Where hvdlog parse (hvdlog/parse/native.py) starts a new document, and the kinds of documents:
# a core line, a torn core line, a stall, a traceback, terminate, chatter, a message-table line.
# Part of the horovod-native ruby filter, read into its context by ../horovod_native.rb.

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

# Fields of the first line's grok that a later document of the same block must not inherit.
PER_EVENT_FIELDS = %w[[@metadata][hvd][level] [@metadata][hvd][time] [log][origin]].freeze

def process(event, lines)
  letter = event.get("[@metadata][hvd][level]")
  letter ? core_event(event, lines, letter) : launcher_event(event, lines)
end

# A document whose first line is a Horovod core line (grok set its level letter).
def core_event(event, lines, letter)
  event.set("[log][level]", @levels.fetch(letter))
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
  own_time(event, first)
  # <= v0.16's bare `WARNING: ` header, also after a space or glued to progress output
  mark = first.index(LEGACY_STALL_MARK)
  legacy = mark && captures(@legacy, first[mark..])
  if legacy && (seconds = captures(@stall_header, legacy["message"]))
    stall(event, lines, seconds["[horovod][stall][seconds]"], event.get("[size]"))
    event.set("[log][level]", "warning")
    event.set("[event][dataset]", "horovod.core")
  elsif match(@ranks_title, first) || match(@ops_title, first) || match(@headless_rank, first)
    # `Missing ranks:` (`Stalled ranks:`, `Stalled ops:`) whose header line was lost (a capture
    # or scrollback that starts in it): the lines after it still name the ranks; so does a rank
    # list whose title went too, when it names Horovod's tensors (a grep keeps only its lines)
    stall(event, lines, nil, event.get("[size]"))
    event.set("[log][level]", "warning")
    event.set("[event][dataset]", "horovod.core")
  elsif headless_stall(event, first)
    # a per-tensor stall line whose header was lost: still a stall report of those ranks
  elsif match(@traceback, first) || match(@frame, first) || match(@lone_exception, first) || match(@excepthook, first) ||
        (first.start_with?(" ", "\t") && lines[1] && match(@frame, lines[1]))
    # a traceback, one whose header was lost (frames first, or a frame's code line first: the
    # cut fell inside a frame), an exception line alone, or Python's report of a failed
    # sys.excepthook (the hook's traceback, then the program's own after `Original exception was:`)
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
  elsif lines.length > 1 && match(@box_rule, first)
    # Open MPI's (ORTE's, PRRTE's) help box: the fields its most severe line has, the whole box its message
    box(event, lines)
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

# Levels in increasing severity (hvdlog/fields.py LEVELS), to pick a box's most severe line.
SEVERITY = %w[trace debug info warning error critical].freeze

# A framed box (blocks.json `openmpi_box`), as hvdlog/parse/messages.py `box_fields` reads it: the
# message table's fields of its most severe line (the first among equals; info when none has a row).
def box(event, lines)
  best = nil
  lines.each do |line|
    found = recognise(line, event)
    best = found if found && (best.nil? || SEVERITY.index(found["[log][level]"]) > SEVERITY.index(best["[log][level]"]))
  end
  (best || {}).each { |field, value| event.set(field, value) }
  event.set("[message]", lines.join("\n"))
end

def chatter(event, message)
  return [event] if @chatter_every.nil? || !match(@chatter, message)
  return [] if @chatter_every.zero?
  key = [event.get("[rank]"), event.get("[horovod][launcher][stream]"), event.get("[log][file][path]")]
  seen = @chatter_lock.synchronize { @chatter_seen[key] += 1 }
  (seen - 1) % @chatter_every == 0 ? [event] : []
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

# A logger's own dated stamp (TensorFlow's C++ logger, loguru: HOROVOD_LINE_TIME), for the conf's date
# filter, as hvdlog/parse/line_times.py reads it. glog/absl (no year) and MXNet (no date) take theirs from
# the file's last dated line there; one event has no such context, so here they keep Logstash's time.
def own_time(event, line)
  found = line[0] =~ /[0-9]/ && captures(@line_time, line)
  dated = found && found["[@metadata][hvd][line_dated]"]
  event.set("[@metadata][hvd][time]", dated.ljust(26, "0")) if dated
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
