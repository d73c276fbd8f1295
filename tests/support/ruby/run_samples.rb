# Answers the message table's samples and near-misses (tests/support/row_samples.py) with the
# ruby filter's rows, as logstash/pipeline/horovod_native.rb reads hvdlog/parse/assets/messages.json:
# for each case, the index of the first row that takes the line (a row whose `lacks` field the
# case gives is skipped) and whether the case's own row matches it.
#
# Usage: jruby run_samples.rb SCRIPT PARAMS_JSON < cases.json   (one JSON line out per case)

require "json"

# The script's context, as logstash-filter-ruby's Script::Context (see run_filter.rb).
class SamplesContext
  def initialize(path, params)
    instance_eval(File.read(path), path, 1)
    register(params)
  end

  def answer(item)
    given = item.fetch("given", {}).transform_keys { |name| reference(name) }
    first = @messages.index do |compiled, _dataset, _fields, _name, lacks, _net|
      !(lacks && given.key?(lacks)) && match(compiled, item.fetch("line"))
    end
    { "first" => first, "own" => match(@messages.fetch(item.fetch("row"))[0], item.fetch("line")) }
  end
end

script_path, params_json = ARGV
context = SamplesContext.new(script_path, JSON.parse(params_json))
JSON.parse($stdin.read).each { |item| puts JSON.generate(context.answer(item)) }
