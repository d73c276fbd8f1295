# The message table (hvdlog/parse/assets/messages.json), read like hvdlog/parse/messages.py.
# Part of the horovod-native ruby filter, read into its context by ../horovod_native.rb.

# A field spec's `map` that names the table's one map of level words (hvdlog/parse/messages.py LEVELS_MAP).
LEVELS_MAP = "levels"

# The level words loggers print -> log.level, written once in the table (`levels`).
def level_words(table)
  words = table[LEVELS_MAP]
  raise ArgumentError, "the message table has no #{LEVELS_MAP.inspect} map of level words" unless words.is_a?(Hash) && !words.empty?
  words.freeze
end

# A row's fields with `"map": "levels"` read as the table's map of level words.
def with_levels(fields)
  fields.transform_values { |spec| spec.is_a?(Hash) && spec["map"] == LEVELS_MAP ? spec.merge("map" => @levels) : spec }
end

def reference(dotted)
  "[#{dotted.split(".").join("][")}]"
end

# Field references => values for the first table row `line` matches, or nil (`event`: the
# line's own, for rows that apply only where it lacks a field, as hvdlog/parse/messages.py).
def recognise(line, event = nil)
  @messages.each do |compiled, dataset, specs, _name, lacks, _net|
    next if lacks && event && !event.get(lacks).nil?
    found = captures(compiled, line)
    next if found.nil?
    fields = found.reject { |field, _| field.start_with?("[@metadata]") }
    specs.each do |name, spec|
      value = if spec.is_a?(Hash)
                source = found[reference(spec["from"])]
                source.nil? ? spec["default"] : spec["map"].fetch(source.to_s, spec["default"])
              else
                spec
              end
      fields[reference(name)] = value unless value.nil?
    end
    fields["[event][dataset]"] = dataset
    fields["[log][level]"] ||= "info"
    return fields
  end
  nil
end
