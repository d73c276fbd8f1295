"""Horovod's timeline file format, shared by the rank's export and the read side (stdlib + orjson).

* :mod:`~hvdlog.timeline_format.reader`: stream the Chrome-trace file as Horovod writes it (cut files too);
* :mod:`~hvdlog.timeline_format.records`: negotiations and operation runs from its events;
* :mod:`~hvdlog.timeline_format.documents`: records as ``horovod.timeline`` documents, and back.
"""
