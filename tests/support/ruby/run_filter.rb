# Runs a Logstash ruby-filter script (`ruby { path => ... script_params => ... }`) outside
# Logstash, through the contract of logstash-filter-ruby 3.1.8 (bundled with Logstash 8.19.20):
#
# - the script file is instance_eval'd in a fresh context object; it must define
#   filter(event); register(params) is called once with script_params when defined;
# - filter(event) must return an Array of events (anything else: the filter raises, the
#   event is tagged `_rubyexception` and passed on unchanged, as are events whose filter
#   raised); the original event is cancelled unless it is in the array; other events in
#   the array are new events;
# - ONE instance serves every pipeline worker: with --workers N, N threads call filter()
#   on the same context at the same time, as Logstash's workers do.
#
# The Event (event.rb) is the part of LogStash::Event the script may use.
#
# Usage: jruby run_filter.rb SCRIPT PARAMS_JSON [--workers N] < events.ndjson > results.ndjson
# Each output line: {"events": [<event hash>, ...]} for the input line at the same position.
# At the end, one line on stderr: `peak heap bytes: N` (the JVM's heap pools' peak use, read
# from java.lang.management after the run), so a test can bound the memory a script needs;
# run the JVM with -Xmx to bound it for real, as Logstash's jvm.options does (1 GB by default).

require "json"
require_relative "event"

# The script's context, as logstash-filter-ruby's Script::Context.
class ScriptContext
  def initialize(path, params)
    instance_eval(File.read(path), path, 1)
    raise "the script must define filter(event)" unless respond_to?(:filter)
    if respond_to?(:register)
      method(:register).arity == 1 ? register(params) : register
    end
  end
end

# What the ruby filter does with one event; returns the events that leave the filter.
def run_one(context, event)
  begin
    results = context.filter(event)
    raise "the script did not return an array from filter" unless results.is_a?(Array)
    bad = results.reject { |item| item.is_a?(Event) }
    raise "the script returned non-event objects #{bad.inspect}" unless bad.empty?
  rescue StandardError => error
    event.tag("_rubyexception")
    warn "ruby filter exception: #{error.class}: #{error.message}"
    return [event]
  end
  event.cancel unless results.any? { |item| item.equal?(event) }
  kept = event.cancelled? ? [] : [event]
  kept + results.reject { |item| item.equal?(event) }
end

script_path, params_json, option, workers = ARGV
workers = option == "--workers" ? Integer(workers) : 1
context = ScriptContext.new(script_path, JSON.parse(params_json))
# JSON without a nesting limit: Logstash hands a filter any event, however deep
inputs = $stdin.each_line.map { |line| Event.new(JSON.parse(line, max_nesting: false)) }
outputs = Array.new(inputs.length)
queue = Queue.new
inputs.each_with_index { |event, index| queue << [event, index] }
threads = Array.new(workers) do
  Thread.new do
    loop do
      event, index = begin
        queue.pop(true)
      rescue ThreadError
        break
      end
      outputs[index] = run_one(context, event).map(&:to_hash)
    end
  end
end
threads.each(&:join)
outputs.each { |events| puts JSON.generate({ "events" => events }, max_nesting: false) }

# The heap's high-water mark of the whole run (each heap pool's peak, summed: an upper bound).
def peak_heap_bytes
  java.lang.management.ManagementFactory.getMemoryPoolMXBeans.select { |pool| pool.getType == java.lang.management.MemoryType::HEAP }
      .sum { |pool| pool.getPeakUsage.getUsed }
end
$stdout.flush
warn "peak heap bytes: #{peak_heap_bytes}" if RUBY_ENGINE == "jruby"
