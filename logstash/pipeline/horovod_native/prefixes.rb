# A prefix no list names, found like hvdlog/parse/prefixes.py.
# Part of the horovod-native ruby filter, read into its context by ../horovod_native.rb.

# a scheduler's prefix is at most this long (hvdlog/parse/prefixes.py _LONGEST)
PREFIX_LONGEST = 170

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
