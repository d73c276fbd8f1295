# The grok pattern file, expanded like hvdlog/parse/patterns.py: load_definitions, compile, match,
# captures, scan.
# Part of the horovod-native ruby filter, read into its context by ../horovod_native.rb.

REFERENCE = /%\{(\w+)(?::([^:}]+))?(?::(int|float))?\}/

Compiled = Struct.new(:regex, :captures)

def load_definitions(path)
  definitions = {}
  File.foreach(path, encoding: "UTF-8") do |line|
    line = line.chomp
    next if line.strip.empty? || line.lstrip.start_with?("#")
    raise ArgumentError, "#{path}: trailing blank in #{line.inspect}; write it as [ ]" if line != line.rstrip
    found = /\A\s*([A-Za-z0-9_]+)\s+(.*\S)\z/.match(line) or raise ArgumentError, "#{path}: bad pattern line #{line.inspect}"
    definitions[found[1]] = found[2]
  end
  definitions
end

def compile(name)
  captures = []
  expand = lambda do |pattern_name|
    source = @definitions.fetch(pattern_name) { raise ArgumentError, "unknown grok pattern %{#{pattern_name}}" }
    source.gsub(REFERENCE) do
      reference = Regexp.last_match
      inner = expand.call(reference[1])
      if reference[2]
        group = "g#{captures.length}"
        captures << [group, reference[2], reference[3]]
        "(?<#{group}>#{inner})"
      else
        "(?:#{inner})"
      end
    end
  end
  # Regexp::MULTILINE, as Logstash's grok compiles the same patterns (`.` matches a newline).
  Compiled.new(Regexp.new(expand.call(name), Regexp::MULTILINE).freeze, captures.freeze).freeze
end

def fields_of(compiled, found)
  fields = {}
  compiled.captures.each do |group, field, type|
    value = found[group]
    next if value.nil?
    value = type == "int" ? value.to_i : type == "float" ? value.to_f : value
    fields[field] = fields.key?(field) ? [fields[field], value].flatten : value
  end
  fields
end

def match(compiled, text)
  compiled.regex.match?(text)
end

def captures(compiled, text)
  found = compiled.regex.match(text)
  found && fields_of(compiled, found)
end

def scan(compiled, text)
  results = []
  text.scan(compiled.regex) { results << fields_of(compiled, Regexp.last_match) }
  results
end
