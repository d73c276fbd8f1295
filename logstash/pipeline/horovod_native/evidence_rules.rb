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

# hvdlog.evidence.kind/.source/.rank of the first rule an event matches (none: no evidence).
def classify_all(events)
  events.each do |event|
    severe = EVIDENCE_LEVELS.include?(event.get("[log][level]"))
    @evidence.each do |rule|
      next unless rule.any_level || severe
      next if rule.has && event.get(rule.has).nil?
      next if rule.lacks && !event.get(rule.lacks).nil?
      next unless rule.when.all? { |name, values| values.include?(event.get(name)) }
      found = {}
      if rule.pattern
        message = event.get("[message]")
        found = message.is_a?(String) && captures(rule.pattern, message)
        next unless found
      end
      event.set("[hvdlog][evidence][kind]", rule.kind)
      event.set("[hvdlog][evidence][source]", rule.source)
      if rule.rank
        rank = found.key?(rule.rank) ? found[rule.rank] : event.get(rule.rank)
        event.set("[hvdlog][evidence][rank]", rank) if rank.is_a?(Integer) && rank >= 0
      end
      break
    end
  end
end
