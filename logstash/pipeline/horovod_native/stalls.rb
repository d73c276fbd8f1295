# Stall inspector warnings of every generation, read like hvdlog/parse/stalls.py.
# Part of the horovod-native ruby filter, read into its context by ../horovod_native.rb.

LEGACY_STALL_MARK = "WARNING: One or more tensors"

def stall(event, lines, seconds, size)
  event.set("[message]", lines.join("\n"))
  mark_stall(event, false)
  event.set("[horovod][stall][seconds]", seconds) unless seconds.nil?
  missing = []
  marked = []
  tensors = []
  # every line: a report whose header and title were lost begins with a rank line
  lines.each do |line|
    if (rank = captures(@rank, line) || captures(@cut_rank, line))
      number = rank["[@metadata][hvd][stall_rank]"]
      missing << number
      marked << number if rank["[@metadata][hvd][stall_mark]"]
      next unless rank.key?("[@metadata][hvd][stall_tensors]")  # an entry cut after its rank

      names = readable_names(line, rank["[@metadata][hvd][stall_tensors]"])
      tensors.concat(names.split(", ").reject(&:empty?))
    elsif match(@shutdown, line)
      event.set("[horovod][stall][shutdown]", true)
    end
  end
  if missing.empty?
    op_fields(lines.join("\n"), size).each { |field, value| event.set(field, value) }
  else
    event.set("[horovod][stall][missing_ranks]", missing.uniq.sort)
    event.set("[horovod][stall][tensors]", tensors.uniq)
    event.set("[horovod][stall][shutdown_ranks]", marked.uniq.sort) unless marked.empty?
  end
end

def mark_stall(event, shutdown)
  event.set("[event][action]", "stall")
  event.set("[horovod][stall][source]", "inspector")
  event.set("[horovod][stall][shutdown]", shutdown)
end

def op_fields(text, size)
  tensors = []
  missing = []
  ready = []
  scan(@op, text).each do |op|
    tensors << op["[@metadata][hvd][stall_tensor]"]
    ranks = op["[@metadata][hvd][stall_ranks]"].delete(" ").split(",").map(&:to_i)
    if op["[@metadata][hvd][stall_kind]"] == "missing"
      missing.concat(ranks)
    else
      ready.concat(ranks)
      # size unknown: the ranks below the highest ready one that are not ready (a lower bound)
      upto = size ? size.to_i : ranks.max.to_i
      missing.concat((0...upto).reject { |rank| ranks.include?(rank) })
    end
  end
  fields = {}
  fields["[horovod][stall][tensors]"] = tensors.uniq unless tensors.empty?
  fields["[horovod][stall][missing_ranks]"] = missing.uniq.sort unless missing.empty?
  fields["[horovod][stall][ready_ranks]"] = ready.uniq.sort unless ready.empty?
  fields
end

# The stall header's words up to its number: a header a terminal wrapped is a prefix of them.
HEADER_WORDS = "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks " \
               "and are waiting for remainder of ranks for more than ".freeze

def stall_header?(message)
  captures(@stall_header, message) || cut_header?(message)
end

# A stall header a terminal wrapped mid-word (the rest went to the next physical line).
def cut_header?(message)
  stem = message.sub(/[0-9.]+\z/, "")
  message.length >= "One or more".length && HEADER_WORDS.start_with?(stem)
end

# The names of a `<rank>: [t1, t2 ...]` line that can be read: no ` ...`, and on a line cut
# short (`1: [t1, t2, t`) not the last, partial name.
def readable_names(line, names)
  return names.delete_suffix(" ...") if line.end_with?("]")
  cut = names.rindex(", ")
  cut ? names[0...cut] : ""
end
