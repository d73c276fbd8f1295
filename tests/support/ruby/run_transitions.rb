# Runs the transitions golden (tests/parse/blocks-transitions.json) through a ruby filter script's
# grammar: for each case, `opener_of(line)` (an `open` case) or `step(state, line, previous,
# blank_before)` (a `state` case), as logstash/pipeline/horovod_native.rb reads
# hvdlog/parse/assets/blocks.json. One JSON line out per case: {"rule": name or null, "then": state or null}.
#
# Usage: jruby run_transitions.rb SCRIPT PARAMS_JSON < cases.json

require "json"

# The script's context, as logstash-filter-ruby's Script::Context (see run_filter.rb).
class TransitionsContext
  def initialize(path, params)
    instance_eval(File.read(path), path, 1)
    register(params)
  end
end

script_path, params_json = ARGV
context = TransitionsContext.new(script_path, JSON.parse(params_json))
JSON.parse($stdin.read).fetch("cases").each do |item|
  if item.key?("open")
    found = context.opener_of(item["open"])
    puts JSON.generate({ "rule" => found&.name, "then" => found&.state&.to_s })
  else
    found = context.step(item["state"].to_sym, item["line"], item.fetch("previous", ""), item.fetch("blank_before", false))
    puts JSON.generate({ "rule" => found&.name, "then" => found&.then_state&.to_s })
  end
end
