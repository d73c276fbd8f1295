# Answers the evidence rules' samples and near-misses (tests/support/evidence_samples.py) with the
# ruby filter's rules, as logstash/pipeline/horovod_native.rb reads hvdlog/parse/assets/messages.json:
# for each case (a document, nested), the index of the first rule that matches it, whether the
# case's own rule does, and the evidence fields `classify_all` sets (as dotted names).
#
# Usage: jruby run_evidence_samples.rb SCRIPT PARAMS_JSON < cases.json   (one JSON line out per case)

require "json"
require_relative "event"

# The script's context, as logstash-filter-ruby's Script::Context (see run_filter.rb).
class EvidenceSamplesContext
  def initialize(path, params)
    instance_eval(File.read(path), path, 1)
    register(params)
  end

  def answer(item)
    event = Event.new(item.fetch("doc"))
    severe = severe?(event)
    first = @evidence.index { |rule| evidence_of(rule, event, severe) }
    own = !evidence_of(@evidence.fetch(item.fetch("row")), event, severe).nil?
    classify_all([event])
    fields = (event.get("[hvdlog][evidence]") || {}).to_h { |name, value| ["hvdlog.evidence.#{name}", value] }
    { "first" => first, "own" => own, "fields" => fields }
  end
end

script_path, params_json = ARGV
context = EvidenceSamplesContext.new(script_path, JSON.parse(params_json))
JSON.parse($stdin.read).each { |item| puts JSON.generate(context.answer(item)) }
