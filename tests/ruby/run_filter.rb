# Runs a Logstash ruby-filter script (`ruby { path => ... }`) outside Logstash, the way the
# ruby filter does: the script is instance_eval'd in a fresh context object, register() gets
# script_params, filter(event) returns the events to keep. The Event below implements the
# part of LogStash::Event the scripts use (get/set/remove with [field][refs], tag, to_hash).
#
# Usage: jruby run_filter.rb SCRIPT PARAMS_JSON < events.ndjson > results.ndjson
# Each output line: {"events": [<event hash>, ...]} for the input line at the same position.

require "json"

class Event
  attr_reader :data

  def initialize(data)
    @data = data
  end

  def get(reference)
    path(reference).reduce(@data) { |node, key| node.is_a?(Hash) ? node[key] : nil }
  end

  def set(reference, value)
    *parents, leaf = path(reference)
    node = parents.reduce(@data) { |current, key| current[key] = current[key].is_a?(Hash) ? current[key] : {} }
    node[leaf] = value
  end

  # LogStash::Event#to_hash: a copy of the fields, without @metadata.
  def to_hash
    Marshal.load(Marshal.dump(@data.reject { |key, _| key == "@metadata" }))
  end

  def remove(reference)
    *parents, leaf = path(reference)
    node = parents.reduce(@data) { |current, key| current.is_a?(Hash) ? current[key] : nil }
    node.delete(leaf) if node.is_a?(Hash)
  end

  def tag(value)
    tags = (@data["tags"] ||= [])
    tags << value unless tags.include?(value)
  end

  private

  def path(reference)
    reference.start_with?("[") ? reference[1..-2].split("][") : [reference]
  end
end

script_path, params_json = ARGV
context = Object.new
context.instance_eval(File.read(script_path), script_path, 1)
context.register(JSON.parse(params_json))
$stdin.each_line do |line|
  kept = context.filter(Event.new(JSON.parse(line)))
  puts JSON.generate({ "events" => kept.map(&:data) })
end
