# horovod-app's ruby filter: puts the JSON event Filebeat decoded under [hvdlog_event]
# (shipper/filebeat.yml's ndjson `target`) at the top level, except what the real file path
# says. Filebeat decodes into a key so that the event cannot overwrite `log.file.path`, and
# so cannot choose `job` or `host.name` (dissected from that real path) or, in a
# `rank-<rank>.jsonl` / `rank-unknown-pid<pid>.jsonl` file, the rank (the name says it, or
# says there is none). In an elastic job's `pid-<pid>.jsonl` (a process's rank changes at
# resets) and in `launcher.jsonl` the event's own `rank` stands.
#
# With a target Filebeat leaves keys dotted (`log.level`); they are expanded here, as
# `expand_keys` did at the root. The event's `tags` join the input's routing tag (a string
# is one tag). A line that was not JSON comes as {message, error.message}: it is marked
# error.type "json" for the conf's parse-failure branch. `@timestamp` is the conf's date
# filter's (a LogStash::Timestamp, which a script cannot make from a string portably).
# Stateless: one instance serves every pipeline worker.

require "json"

def register(params)
  @source = params.fetch("source", "hvdlog_event")
end

# Paths whose value only Filebeat may give: the real file path, what it says, the read offset.
PATH_ONLY = [%w[job], %w[host name], %w[log file path], %w[log offset]].freeze
RANK_FROM_NAME = /\Arank-(?:[0-9]+|unknown-pid[0-9]+)\.jsonl(?:\.[0-9]+)?\z/.freeze
DECODE_ERROR = "Error decoding JSON: ".freeze

def filter(event)
  decoded = event.get("[#{@source}]")
  event.remove("[#{@source}]")
  return [event] unless decoded.is_a?(Hash)

  if decode_failure?(decoded)
    event.set("[error]", { "message" => decoded["error"]["message"], "type" => "json" })
    event.set("[message]", decoded["message"])
    return [event]
  end
  fields = expand(decoded)
  fields.delete("@timestamp")
  name = File.basename(event.get("[log][file][path]").to_s)
  protected = RANK_FROM_NAME.match?(name) ? PATH_ONLY + [%w[rank]] : PATH_ONLY
  protected.each { |path| drop(fields, path) }
  claimed_tags = fields.delete("tags")
  fields.each do |key, value|
    key = key.tr("[]", "()") # a field reference cannot name `[` or `]`
    current = event.get("[#{key}]")
    event.set("[#{key}]", current.is_a?(Hash) && value.is_a?(Hash) ? merge(current, value) : value)
  end
  tags = claimed_tags.nil? ? [] : Array(claimed_tags)
  tags.each { |tag| event.tag(tag.is_a?(String) ? tag : JSON.generate(tag)) }
  [event]
end

def decode_failure?(decoded)
  error = decoded["error"]
  decoded.keys.sort == %w[error message] && error.is_a?(Hash) && error.keys == ["message"] &&
    error["message"].is_a?(String) && error["message"].start_with?(DECODE_ERROR)
end

# Dotted keys into objects, at every level (`{"log.level": "error"}` -> `{"log": {"level": ...}}`);
# a later key wins where two disagree, as a later JSON key does.
def expand(hash)
  hash.each_with_object({}) do |(key, value), out|
    value = expand(value) if value.is_a?(Hash)
    *parents, leaf = key.split(".", -1)
    node = parents.reduce(out) { |current, part| current[part] = current[part].is_a?(Hash) ? current[part] : {} }
    node[leaf] = node[leaf].is_a?(Hash) && value.is_a?(Hash) ? merge(node[leaf], value) : value
  end
end

def merge(base, over)
  base.merge(over) { |_key, old, new| old.is_a?(Hash) && new.is_a?(Hash) ? merge(old, new) : new }
end

# Removes one path from the event's fields; a scalar where the path needs an object goes too
# (a `host: "x"` would otherwise replace the real host.name).
def drop(fields, path)
  *parents, leaf = path
  node = fields
  parents.each do |part|
    unless node[part].is_a?(Hash)
      node.delete(part)
      return
    end
    node = node[part]
  end
  node.delete(leaf)
end
