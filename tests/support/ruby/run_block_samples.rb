# Answers the block grammar's samples and near-misses (tests/parse/test_block_samples.py) with the
# ruby filter's reading of hvdlog/parse/assets/blocks.json (logstash/pipeline/horovod_native/blocks.rb).
# For each case: what took its line `at` (`taken`: the opener that began a block with it, or the
# state rule that continued one), the block's state before that line, whether the case's own row
# takes it (`own`), and the documents the lines make (`blocks`, from the filter's `segments`); for
# a `classify` row's text, the first classify row that matches it and whether its own row does.
#
# A stream's lines are walked as the filter's `segments` walks an event's: a first line that is a
# Horovod core line opens the stall block when its message is a stall header (native.rb
# `pieces_of`); the grammar's `core_opens` row of that state names it.
#
# Usage: jruby run_block_samples.rb SCRIPT PARAMS_JSON < cases.json   (one JSON line out per case)

require "json"

# The script's context, as logstash-filter-ruby's Script::Context (see run_filter.rb).
class BlockSamplesContext
  def initialize(path, params)
    instance_eval(File.read(path), path, 1)
    register(params)
    blocks = JSON.parse(File.read(params.fetch("blocks_file"), encoding: "UTF-8"))
    @core_names = blocks.fetch("core_opens").to_h { |row| [row.fetch("state").to_sym, row.fetch("name")] }
  end

  # The state the first line opens as a core line (`pieces_of`), or nil when it is none.
  def first_state(lines)
    core = lines.first.to_s.start_with?("[") && captures(@core_line, lines.first)
    return nil unless core
    stall_header?(core["message"].to_s) ? :stall : :core
  end

  # [kind, name, state before, previous, blank_before] of each line, as `segments` takes it.
  def walk(lines)
    opened = first_state(lines)
    state = nil
    last = -1
    lines.each_with_index.map do |line, index|
      previous = state ? lines[last] : ""
      blank = state ? last + 1 < index : false
      if index.zero? && opened
        last = 0
        state = opened == :core ? nil : opened  # a plain core line: no rule continues it
        next [state ? "open" : "single", @core_names[opened], nil, "", false]
      end
      rule = state && step(state, line, previous, blank)
      if rule
        next ["hold", rule.name, state, previous, blank] if rule.then_state == :hold
        before = state
        state = rule.then_state
        last = index
        next ["continue", rule.name, before, previous, blank]
      end
      before = state
      state = nil
      next ["skip", nil, before, previous, blank] if line.strip.empty?
      last = index
      found = opener_of(line)
      found = nil unless found && header_follows?(found, line)
      state = found&.state
      [found ? "open" : "single", found&.name, before, previous, blank]
    end
  end

  # The [first, last] line of each document `segments` makes (blank lines between documents in none).
  def blocks(lines)
    cursor = 0
    segments(lines, first_state(lines)).map do |piece|
      cursor += 1 while cursor < lines.length && lines[cursor].strip.empty? && !piece.first.strip.empty?
      first = cursor
      cursor += piece.length
      raise "segments gave lines that are not the input's" unless lines[first, piece.length] == piece
      [first, cursor - 1]
    end
  end

  def answer(item)
    lines = item.fetch("lines")
    state = item["state"]&.to_sym
    line = lines.fetch(item.fetch("at"))
    if item.fetch("part") == "classify"
      rows = @classify.fetch(state)
      return { "taken" => rows.index { |pattern, _fields| captures(pattern, line) },
               "own" => captures(rows.fetch(item.fetch("index"))[0], line) ? true : false }
    end
    kind, name, before, previous, blank = walk(lines).fetch(item.fetch("at"))
    own = case item.fetch("part")
          when "opens"
            opener = @opens.fetch(item.fetch("index"))
            opens?(opener, line) && header_follows?(opener, line)
          when "core_opens" then kind == "open" && name == item.fetch("name")
          else
            rule = @states.fetch(state).fetch(item.fetch("index"))
            before == state ? holds?(rule, line, previous, blank) : nil
          end
    { "taken" => %w[open continue hold].include?(kind) ? name : nil, "state" => before&.to_s, "own" => own,
      "blocks" => blocks(lines) }
  end
end

script_path, params_json = ARGV
context = BlockSamplesContext.new(script_path, JSON.parse(params_json))
JSON.parse($stdin.read).each { |item| puts JSON.generate(context.answer(item)) }
