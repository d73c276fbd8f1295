// Runs grok patterns in the Elasticsearch grok engine (org.elasticsearch.grok: Joni, the
// regex engine Logstash's grok uses too, plus the logstash-patterns-core bank bundled in
// the jar) and prints the captures, so tests can compare them with hvdlog's Python
// translation of the same pattern file.
//
// Why not `_ingest/pipeline/_simulate`: the test Elasticsearch (integ-test-zip) has no
// ingest-common module, so the grok processor does not exist there.
//
// Usage: java -cp <grok+joni+jcodings jars>:<dir> GrokHarness PATTERN_FILE ECS_MODE < requests
// Request lines: `NAME<TAB>base64(text)`. Output lines: JSON
// {"name": NAME, "match": true|false, "captures": {field: value, ...}}.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.elasticsearch.grok.Grok;
import org.elasticsearch.grok.GrokBuiltinPatterns;
import org.elasticsearch.grok.PatternBank;

public final class GrokHarness {
    // Same rule as Logstash's pattern loader: NAME, whitespace, the rest of the line.
    private static final Pattern DEFINITION = Pattern.compile("^([A-Za-z0-9_]+)\\s+(.*)$");

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: GrokHarness PATTERN_FILE ECS_MODE(disabled|v1) < requests");
            System.exit(2);
        }
        Map<String, String> ours = new LinkedHashMap<>();
        for (String line : Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8)) {
            String trimmed = line.strip();
            if (trimmed.isEmpty() || trimmed.startsWith("#")) {
                continue;
            }
            Matcher found = DEFINITION.matcher(line);
            if (!found.matches()) {
                System.err.println("bad pattern line: " + line);
                System.exit(2);
            }
            ours.put(found.group(1), found.group(2));
        }
        PatternBank bank = GrokBuiltinPatterns.get(args[1]).extendWith(ours);
        Map<String, Grok> compiled = new LinkedHashMap<>();
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String request;
        while ((request = in.readLine()) != null) {
            int tab = request.indexOf('\t');
            String name = request.substring(0, tab);
            String text = new String(Base64.getDecoder().decode(request.substring(tab + 1)), StandardCharsets.UTF_8);
            Grok grok = compiled.computeIfAbsent(name, key -> new Grok(bank, "%{" + key + "}", message -> {}));
            Map<String, Object> captures = grok.captures(text);
            StringBuilder json = new StringBuilder("{\"name\":").append(quote(name));
            json.append(",\"match\":").append(captures != null).append(",\"captures\":{");
            if (captures != null) {
                boolean first = true;
                for (Map.Entry<String, Object> entry : captures.entrySet()) {
                    if (entry.getValue() == null) {
                        continue;
                    }
                    json.append(first ? "" : ",").append(quote(entry.getKey())).append(':').append(value(entry.getValue()));
                    first = false;
                }
            }
            out.println(json.append("}}"));
        }
        out.flush();
    }

    private static String value(Object value) {
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        if (value instanceof java.util.List<?> list) {
            StringBuilder json = new StringBuilder("[");
            for (int i = 0; i < list.size(); i++) {
                json.append(i == 0 ? "" : ",").append(value(list.get(i)));
            }
            return json.append(']').toString();
        }
        return quote(value.toString());
    }

    private static String quote(String text) {
        StringBuilder json = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> json.append("\\\"");
                case '\\' -> json.append("\\\\");
                case '\n' -> json.append("\\n");
                case '\r' -> json.append("\\r");
                case '\t' -> json.append("\\t");
                default -> {
                    if (c < 0x20) {
                        json.append(String.format("\\u%04x", (int) c));
                    } else {
                        json.append(c);
                    }
                }
            }
        }
        return json.append('"').toString();
    }
}
