# Runs grok expressions the way Logstash's grok filter does, under JRuby (the Ruby of
# Logstash 8.19, whose Regexp is Joni): the behaviour modelled is that of the versions
# bundled with Logstash 8.19.20 -- logstash-filter-grok 4.4.4 over jls-grok 0.11.5:
#
# - pattern files: a line matching /^\s*#/ is skipped; leading blanks removed; split once on
#   whitespace into NAME and PATTERN; a line without PATTERN skipped; only the newline is
#   chomped (trailing spaces stay part of the pattern);
# - compile: the first %{NAME} or %{NAME:field[:type]} is replaced, over and over, by
#   `(?:def)` when it names no field (named_captures_only, the filter's default) or by
#   `(?<NAME:field:type>def)`; the result is compiled with Regexp::MULTILINE, so `.`
#   matches a newline (in Ruby `^`/`$` are line anchors whatever the options);
# - match: Regexp#match on the whole event text (a search, not anchored);
# - captures: every named group in order, converted with to_i/to_f, handed to the filter's
#   `handle`: nil and "" dropped (keep_empty_captures => false), a field seen again becomes
#   an array (a String is promoted; a number is kept as it is).
#
# Usage: jruby logstash_grok.rb PATTERN_FILE [multiline|plain] [drop_empty|keep_empty] < requests > results
# Request lines: `EXPRESSION<TAB>base64(text)` (EXPRESSION a grok expression such as
# `%{HOROVOD_CORE_LINE}`; a bare NAME means %{NAME}). Output: one JSON line per request,
# {"match": true|false, "captures": {field: value}}. `plain` compiles without
# Regexp::MULTILINE: only for the test proving the mode matters. `keep_empty` is the grok
# option keep_empty_captures => true.

require "base64"
require "json"

REFERENCE = /%\{(?<name>(?<pattern>[A-Za-z0-9_]+)(?::(?<field>[@\[\]A-Za-z0-9_:.-]+))?)\}/

def load_patterns(path)
  patterns = {}
  File.foreach(path, encoding: "UTF-8") do |line|
    next if line =~ /^\s*#/
    name, pattern = line.sub(/^\s*/, "").split(/\s+/, 2)
    next if pattern.nil?
    patterns[name] = pattern.chomp
  end
  patterns
end

def compile(patterns, expression, options)
  expanded = expression.dup
  10_000.times do
    found = REFERENCE.match(expanded)
    return Regexp.new(expanded, options) if found.nil?
    definition = patterns.fetch(found[:pattern]) { raise ArgumentError, "pattern #{found[0]} not defined" }
    replacement = found[:name].include?(":") ? "(?<#{found[:name]}>#{definition})" : "(?:#{definition})"
    expanded.sub!(found[0]) { replacement }
  end
  raise ArgumentError, "#{expression}: recursion too deep"
end

def captures(regex, found, keep_empty)
  fields = {}
  regex.named_captures.each do |name, indices|
    _pattern, field, coerce = name.split(":")
    indices.each do |index|
      value = found[index]
      next if value.nil? || (value.empty? && !keep_empty)
      value = value.to_i if coerce == "int"
      value = value.to_f if coerce == "float"
      previous = fields[field]
      if previous.nil?
        fields[field] = value
      elsif previous.is_a?(Array)
        previous << value
      elsif previous.is_a?(String)
        fields[field] = [previous, value]
      end
    end
  end
  fields
end

pattern_file, mode, empty = ARGV
options = mode == "plain" ? 0 : Regexp::MULTILINE
keep_empty = empty == "keep_empty"
patterns = load_patterns(pattern_file)
compiled = {}
$stdout.sync = false
$stdin.each_line do |request|
  expression, encoded = request.chomp.split("\t", 2)
  expression = "%{#{expression}}" unless expression.include?("%{")
  text = Base64.strict_decode64(encoded.to_s).force_encoding("UTF-8")
  regex = (compiled[expression] ||= compile(patterns, expression, options))
  found = regex.match(text)
  puts JSON.generate({ "match" => !found.nil?, "captures" => found ? captures(regex, found, keep_empty) : {} })
end
