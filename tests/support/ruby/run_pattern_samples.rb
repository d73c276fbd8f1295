# Answers the grok pattern file's own samples and near-misses (hvdlog/parse/assets/patterns/horovod,
# `#+`/`#-` comments) with the ruby filter's expansion of the patterns
# (logstash/pipeline/horovod_native/patterns.rb, read as horovod_native.rb reads it): for each
# case, whether the named definition, compiled as the filter compiles it, matches the text anywhere.
#
# Usage: jruby run_pattern_samples.rb PATTERNS_RB PATTERN_FILE < cases.json   (one JSON line out per case)
# cases.json: [{"name": "HOROVOD_INT", "text": "42"}, ...]

require "json"

# The script's context, as logstash-filter-ruby's Script::Context (see run_filter.rb).
class PatternSamplesContext
  def initialize(path, pattern_file)
    instance_eval(File.read(path, encoding: "UTF-8"), path, 1)
    @definitions = load_definitions(pattern_file)
    @compiled = {}
  end

  def answer(item)
    name = item.fetch("name")
    match(@compiled[name] ||= compile(name), item.fetch("text"))
  end
end

patterns_rb, pattern_file = ARGV
context = PatternSamplesContext.new(patterns_rb, pattern_file)
JSON.parse($stdin.read).each { |item| puts JSON.generate({ "match" => context.answer(item) }) }
