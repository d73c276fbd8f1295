# The part of LogStash::Event a ruby-filter script may use (get/set with [field][refs], remove,
# clone, tag, cancel/cancelled?, to_hash); get returns a copy, as Logstash's does (the Java event
# converts values on the way out). Shared by run_filter.rb and the grammar-sample runners.

class Event
  def initialize(data)
    @data = data
    @cancelled = false
  end

  def get(reference)
    value = path(reference).reduce(@data) { |node, key| node.is_a?(Hash) ? node[key] : nil }
    Marshal.load(Marshal.dump(value))
  end

  def set(reference, value)
    *parents, leaf = path(reference)
    node = parents.reduce(@data) { |current, key| current[key] = current[key].is_a?(Hash) ? current[key] : {} }
    node[leaf] = Marshal.load(Marshal.dump(value))
  end

  def remove(reference)
    *parents, leaf = path(reference)
    node = parents.reduce(@data) { |current, key| current.is_a?(Hash) ? current[key] : nil }
    node.is_a?(Hash) ? node.delete(leaf) : nil
  end

  def include?(reference)
    *parents, leaf = path(reference)
    node = parents.reduce(@data) { |current, key| current.is_a?(Hash) ? current[key] : nil }
    node.is_a?(Hash) && node.key?(leaf)
  end

  def tag(value)
    tags = (@data["tags"] ||= [])
    tags << value unless tags.include?(value)
  end

  # A deep copy, as LogStash::Event#clone makes (a new event for the same pipeline).
  def clone
    Event.new(Marshal.load(Marshal.dump(@data)))
  end

  def cancel
    @cancelled = true
  end

  def cancelled?
    @cancelled
  end

  # As LogStash::Event#to_hash: the fields without @metadata (kept apart by the Java event).
  def to_hash
    Marshal.load(Marshal.dump(@data.reject { |key, _| key == "@metadata" }))
  end

  private

  def path(reference)
    reference.start_with?("[") ? reference[1..-2].split("][") : [reference]
  end
end
