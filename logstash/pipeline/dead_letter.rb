# Ruby filter script of the dead-letter pipeline (dead-letter.conf): turns an event that
# Elasticsearch refused (read back from a pipeline's dead-letter queue) into a document
# that cannot be refused again, so the rejection is searchable instead of expiring unseen:
#
#   message         "Elasticsearch rejected an event from <pipeline>: <error type>: <reason>"
#   error.type      Elasticsearch's error type (document_parsing_exception...)
#   error.message   Elasticsearch's reason, or the whole DLQ reason when it has no JSON part
#   event.original  the original event, as JSON text (every field, whatever its type)
#   event.dataset   horovod.rejected; event.kind pipeline_error; log.level warning
#   job, rank, host.name  copied when they have the contract's type (to filter by them)
#   @timestamp      when the event entered the dead-letter queue (the original time may
#                   be the very thing that was rejected; it is in event.original)
#
# Bounds (script_params): event.original is cut to max_original_bytes (default 32 KiB) and
# Elasticsearch's reason to max_reason_bytes (default 8 KiB), each marked `...(cut)`: the
# reason appears twice (message and error.message), so a 5 MB reason would otherwise make
# a 10 MB document, which Elasticsearch may refuse in its turn.
#
# The reason is what logstash-output-elasticsearch writes: "Could not index event to
# Elasticsearch. status: 400, action: [...], response: {"create"=>{..."error"=>{"type"=>
# "...", "reason"=>"..."}}}" (a Ruby Hash#inspect).

require "json"

def register(params)
  @max_original = Integer(params.fetch("max_original_bytes", 32_768))
  @max_reason = Integer(params.fetch("max_reason_bytes", 8_192))
end

# `text` whole when it fits in `limit` bytes, else its first `limit` bytes (never half a
# UTF-8 character) and the cut mark.
def cut(text, limit)
  return text if text.bytesize <= limit
  text.byteslice(0, limit).scrub("") + "...(cut)"
end

REASON_RE = /"error"\s*=>\s*\{\s*"type"\s*=>\s*"((?:[^"\\]|\\.)*)",\s*"reason"\s*=>\s*"((?:[^"\\]|\\.)*)"/

def unescape(text)
  text.gsub(/\\(.)/, '\1')
end

def filter(event)
  original = event.to_hash
  metadata = event.get("[@metadata][dead_letter_queue]") || {}
  pipeline = event.get("[@metadata][hvd][pipeline]") || metadata["plugin_id"] || "a pipeline"
  reason = metadata["reason"].to_s
  type, detail = (m = REASON_RE.match(reason)) ? [unescape(m[1]), unescape(m[2])] : [nil, reason]
  type = cut(type, 256) if type
  detail = cut(detail, @max_reason)
  # no nesting limit: an event nested past JSON's default 100 levels is often why it was refused
  # (JSON::NestingError would lose the rejection); the text is cut to max_original_bytes anyway
  text = cut(JSON.generate(original, max_nesting: false), @max_original)
  identity = {
    "job" => (original["job"] if original["job"].is_a?(String)),
    "rank" => (original["rank"] if original["rank"].is_a?(Integer)),
    "host" => (original["host"].is_a?(Hash) && original["host"]["name"].is_a?(String) ? { "name" => original["host"]["name"] } : nil),
  }
  original.each_key { |key| event.remove(key) unless key == "@timestamp" }
  entry_time = metadata["entry_time"]
  event.set("@timestamp", entry_time) if entry_time
  event.set("message", "Elasticsearch rejected an event from #{pipeline}: #{[type, detail].compact.join(': ')}")
  event.set("[error][type]", type) if type
  event.set("[error][message]", detail.empty? ? "(no reason recorded)" : detail)
  event.set("[event][original]", text)
  event.set("[event][dataset]", "horovod.rejected")
  event.set("[event][kind]", "pipeline_error")
  event.set("[log][level]", "warning")
  identity.each { |key, value| event.set(key, value) unless value.nil? }
  event.tag("_hvdlog_rejected")
  [event]
end
