# Failure evidence: the message table's evidence rules, applied like hvdlog/parse/evidence_rules.py.
# Part of the horovod-native ruby filter, read into its context by ../horovod_native.rb.

EVIDENCE_LEVELS = %w[warning error critical].freeze

EvidenceRule = Struct.new(:kind, :source, :pattern, :when, :has, :rank, :any_level, :lacks)

def load_evidence(path)
  JSON.parse(File.read(path, encoding: "UTF-8")).fetch("evidence", []).map do |row|
    pattern = row["pattern"] && compile(row["pattern"])
    when_fields = row.fetch("when", {}).map { |name, values| [reference(name), values] }
    EvidenceRule.new(row.fetch("kind"), row.fetch("source"), pattern, when_fields, row["has"] && reference(row["has"]),
                     row["rank"] && reference(row["rank"]), row.fetch("any_level", false),
                     row["lacks"] && reference(row["lacks"])).freeze
  end.freeze
end

# The evidence fields `rule` gives `event` ({"kind", "source"[, "rank"]}), or nil when it does not apply
# (`severe`: the event's level is warning or above). EvidenceRule#match in the Python module.
def evidence_of(rule, event, severe)
  return nil unless rule.any_level || severe
  return nil if rule.has && event.get(rule.has).nil?
  return nil if rule.lacks && !event.get(rule.lacks).nil?
  return nil unless rule.when.all? { |name, values| values.include?(event.get(name)) }
  found = {}
  if rule.pattern
    message = event.get("[message]")
    found = message.is_a?(String) && captures(rule.pattern, message)
    return nil unless found
  end
  fields = { "kind" => rule.kind, "source" => rule.source }
  if rule.rank
    rank = found.key?(rule.rank) ? found[rule.rank] : event.get(rule.rank)
    fields["rank"] = rank if rank.is_a?(Integer) && rank >= 0
  end
  fields
end

# Whether every rule looks at the event (warning or above), not only the any_level ones.
def severe?(event)
  EVIDENCE_LEVELS.include?(event.get("[log][level]"))
end

# hvdlog.evidence.kind/.source/.rank of the first rule an event matches (none: no evidence).
def classify_all(events)
  events.each do |event|
    severe = severe?(event)
    @evidence.each do |rule|
      fields = evidence_of(rule, event, severe) or next
      fields.each { |name, value| event.set("[hvdlog][evidence][#{name}]", value) }
      break
    end
  end
end
