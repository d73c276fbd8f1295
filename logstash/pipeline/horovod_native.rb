# Multi-line native events for the horovod-native pipeline (a Logstash ruby filter script):
# stall warnings of every generation -> horovod.stall.*, Python tracebacks and C++
# `terminate` -> error.*, and the per-cycle TRACE/DEBUG chatter switch.
#
# The steps live in horovod_native/, one file per module of hvdlog/parse/ with the same name
# for the same step (patterns, blocks, prefixes, messages, stalls, evidence_rules, native);
# this file loads them and holds register() and filter(). It takes its regexes from the same
# grok pattern file (hvdlog/parse/assets/patterns/horovod), expanded the way hvdlog's Python
# loader does, so a pattern changes in one place.
#
# Input (set by horovod-native.conf): [@metadata][hvd][block] = the event's lines with
# arrival times and launcher tags removed; [message] = the C++ message when the first line
# is a core line; [@metadata][hvd][level] = its level letter. Sets [log][level] and
# [event][dataset] of every event.
#
# Concurrency: Logstash creates ONE instance of this filter per pipeline and every pipeline
# worker calls filter() on it at the same time (the semantics of `concurrency :shared`).
# register() builds only read-only state; the one mutable state, the chatter sampling
# counters (per rank, stream and file, like `hvdlog parse`), is guarded by a Mutex.

require "json"
require "thread"

# The parts are read into this script's own context, as Logstash's ruby filter reads this file
# (logstash-filter-ruby: `instance_eval(File.read(path), path, 1)` on one execution context per
# filter), so their methods and constants are this filter's alone and a pipeline reload reads
# them again. Not require_relative: that would define every method on Object, for every plugin
# of the JVM, and load once per process. __FILE__ is the `path =>` of horovod-native.conf.
HOROVOD_NATIVE_PARTS = %w[patterns blocks prefixes messages stalls evidence_rules native].freeze
HOROVOD_NATIVE_PARTS.each do |part|
  file = File.join(File.dirname(__FILE__), "horovod_native", "#{part}.rb")
  instance_eval(File.read(file, encoding: "UTF-8"), file, 1)
end

def register(params)
  @definitions = load_definitions(params.fetch("patterns_file"))
  # The declared multi-line grammar and the bounds (hvdlog/parse/assets/blocks.json).
  blocks = JSON.parse(File.read(params.fetch("blocks_file"), encoding: "UTF-8"))
  @max_document_bytes = Integer(blocks.fetch("limits").fetch("max_document_bytes"))
  @max_pieces = Integer(blocks.fetch("limits").fetch("max_pieces"))
  load_grammar(blocks)
  @stall_header = compile("HOROVOD_STALL_HEADER")
  @legacy = compile("HOROVOD_STALL_LEGACY_LINE")
  @ranks_title = compile("HOROVOD_STALL_RANKS_TITLE")
  @rank = compile("HOROVOD_STALL_RANK")
  @cut_rank = compile("HOROVOD_STALL_CUT_RANK")
  @headless_rank = compile("HOROVOD_STALL_HEADLESS_RANK")
  @line_time = compile("HOROVOD_LINE_TIME")
  @shutdown = compile("HOROVOD_STALL_SHUTDOWN")
  @ops_title = compile("HOROVOD_STALL_OPS_TITLE")
  @ops_line = compile("HOROVOD_STALL_OPS_LINE")
  @op = compile("HOROVOD_STALL_OP")
  @traceback = compile("HOROVOD_TRACEBACK_START")
  @excepthook = compile("HOROVOD_EXCEPTHOOK_TITLE")
  @exception = compile("HOROVOD_EXCEPTION_LINE")
  @frame = compile("HOROVOD_TRACEBACK_FRAME")
  @lone_exception = compile("HOROVOD_LONE_EXCEPTION")
  @exception_more = compile("HOROVOD_EXCEPTION_MORE")
  @terminate = compile("HOROVOD_TERMINATE")
  @what = compile("HOROVOD_TERMINATE_WHAT")
  @chatter = compile("HOROVOD_CHATTER")
  @broken = compile("HOROVOD_BROKEN_LINE")
  @core_line = compile("HOROVOD_CORE_LINE")
  @scheduler_at = Regexp.new("\\G(?:#{compile("HOROVOD_SCHEDULER_PREFIX").regex.source})")
  # The message table (hvdlog/parse/assets/messages.json), shared with hvdlog.parse.messages.
  table = JSON.parse(File.read(params.fetch("messages_file"), encoding: "UTF-8"))
  # The level words loggers print -> log.level, Horovod's core letters among them (the table's `levels`).
  @levels = level_words(table)
  @messages = table.fetch("messages").map do |row|
    compiled = compile(row.fetch("pattern"))
    raise ArgumentError, "#{row["pattern"]} must be anchored with \\A" unless compiled.regex.source.start_with?("\\A", "^")
    [compiled, row.fetch("dataset", "horovod.launcher"), with_levels(row.fetch("fields", {})), row["pattern"], row["lacks"] && reference(row["lacks"]), row.fetch("net", false)].freeze
  end.freeze
  # Every line shape a block or a message begins with, as one regex (hvdlog/parse/prefixes.py
  # `_starts`): what an untagged event's first line must show behind a prefix no list names.
  # the safety net's rows (net: true) match any failure-shaped line: it says nothing of where a line starts
  known_rows = @messages.reject { |row| row[5] }
  @known_start = Regexp.union(@core_line.regex, *known_rows.map { |row| row[0].regex }, *known_openers)
  @stall_ops_line = compile("HOROVOD_STALL_OPS_LINE")
  # signal number -> name: the map of mpirun's row (Hydra's box uses it too)
  @signal_names = @messages.find { |row| row[3] == "HOROVOD_MPIRUN_SIGNAL" }[2].fetch("event.reason").fetch("map")
  @evidence = load_evidence(params.fetch("messages_file"))
  @hydra_rank = compile("HOROVOD_HYDRA_RANK")
  @box_rule = compile("HOROVOD_OPENMPI_BOX_RULE")
  @hydra_end = compile("HOROVOD_HYDRA_END")
  setting = params.fetch("chatter", "keep").to_s
  @chatter_every = case setting
                   when "keep" then nil
                   when "drop" then 0
                   when /\A(?:sample=)?([1-9]\d*)\z/ then Regexp.last_match(1).to_i
                   else raise ArgumentError, "HVDLOG_CHATTER must be keep, drop or sample=N, not #{setting.inspect}"
                   end
  @chatter_seen = Hash.new(0)
  @chatter_lock = Mutex.new
end

def filter(event)
  block = event.get("[@metadata][hvd][block]").to_s
  lines = block.split("\n", -1)
  lines.pop while lines.length > 1 && lines.last.strip.empty?
  # a core line's event: its first line lost the prefix in the conf, its other lines lose it here
  lines = unprefixed(event, lines) unless event.get("[horovod][launcher][format]") ||
                                          (event.get("[@metadata][hvd][level]") && !event.get("[@metadata][hvd][prefix]"))
  header = event.get("[@metadata][hvd][level]") && torn_header(lines.first.to_s)
  classify_all(header ? untorn(event, lines, header) : pieces_of(event, lines))
end
