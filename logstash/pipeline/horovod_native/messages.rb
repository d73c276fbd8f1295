# The message table (hvdlog/parse/assets/messages.json), read like hvdlog/parse/messages.py.
# Part of the horovod-native ruby filter, read into its context by ../horovod_native.rb.

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
