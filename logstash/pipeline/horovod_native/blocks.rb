# The declared multi-line grammar and the bounds of one document (hvdlog/parse/assets/blocks.json),
# read like hvdlog/parse/blocks.py: openers, state rules, segments, `classify`, bound.
# Part of the horovod-native ruby filter, read into its context by ../horovod_native.rb.

TRUNCATED_TAG = "_hvdlog_truncated"

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

# Whether `rule` continues a block with `line` (Rule.holds in blocks.py).
def holds?(rule, line, previous, blank_before)
  rule.tests.all? { |test| test.call(line, previous, blank_before) }
end

# The rule of `state` that `line` satisfies (nil: the document ends before it).
def step(state, line, previous, blank_before)
  (@states[state] || []).find { |rule| holds?(rule, line, previous, blank_before) }
end

# Whether `opener` opens `line`: its prefix, then its pattern (from the `contains` marker on,
# when it has one), then its conditions (Opener.opens in blocks.py).
def opens?(opener, line)
  return false unless line.start_with?(opener.prefix)
  return false if opener.contains && !line.include?(opener.contains)
  return false if opener.pattern && !match(opener.pattern, opener.contains ? line[line.index(opener.contains)..] : line)
  opener.tests.all? { |test| test.call(line, "", false) }
end

# The first opener of blocks.json `opens` that `line` satisfies, or nil.
def opener_of(line)
  @opens.find { |opener| opens?(opener, line) }
end

# False for a `legacy_stall` line whose text after the marker is no whole stall header
# (<= v0.16's bare `WARNING: ` header, also after a space or glued to progress output, cut short);
# true for any other opener (header_follows in blocks.py).
def header_follows?(opener, line)
  return true unless opener.contains
  legacy = captures(opener.pattern, line[line.index(opener.contains)..])
  legacy && captures(@stall_header, legacy["message"]) ? true : false
end

# The state a line opens (nil: a document of its own).
def opening(line)
  found = opener_of(line)
  found && header_follows?(found, line) ? found.state : nil
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
