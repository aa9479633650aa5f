"""Large attempt records kept on disk, not in memory, until the run is written.

The controller holds every attempt's record (one compact JSON string) from its report until
the run document is built. A failing attempt keeps its answer for the case files, and an
answer may be as large as a provider body (``response_bytes``, 32 MiB) or a recorded fixture
(``fixture_bytes``, 16 MiB): 60 failing rows of 15 MiB held 2.8 GB at the end of a run, so
the memory of a run grew with the size of its answers, which the model decides.

A :class:`TextSpool` writes each record longer than :data:`SPILL_CHARS` to one unnamed
temporary file (deleted by the system when closed, or when the process ends however it ends)
and hands back a :class:`Spooled` place instead; shorter records, nearly all of them, stay in
memory as they are. A run's memory then grows with its attempt count only, and the answers
are read back one case at a time while the run document is written
(``goldeval.results.run_document.RunCollector.iter_cases``).

The records are already masked (goldeval.core.secrets) when they reach the controller, so
the file holds nothing the run folder does not. Should the file not be writable (no
temporary folder, disk full), the records stay in memory, as before: a run is never lost
for want of a spool.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import IO

#: Records up to this many characters stay in memory (an attempt's record without a long
#: answer is one to a few kilobytes).
SPILL_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class Spooled:
    """Where one record lies in the spool file: its UTF-8 bytes at ``offset``."""

    offset: int
    size: int


#: What the collector keeps per attempt: the record itself, or its place in the spool.
Held = str | Spooled


class TextSpool:
    """Records over ``threshold`` characters written to one temporary file (see the module
    docstring); :meth:`text` gives a record back whichever way it was held."""

    def __init__(self, threshold: int = SPILL_CHARS) -> None:
        self.threshold = threshold
        self._file: IO[bytes] | None = None
        self._end = 0
        #: The spool could not be written once: every later record stays in memory.
        self.unavailable = False

    def hold(self, text: str) -> Held:
        if len(text) <= self.threshold or self.unavailable:
            return text
        data = text.encode("utf-8", errors="surrogatepass")
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="goldeval-attempts-")
            self._file.seek(self._end)
            self._file.write(data)
        except OSError:
            self.unavailable = True
            return text
        place = Spooled(self._end, len(data))
        self._end += len(data)
        return place

    def text(self, held: Held) -> str:
        if isinstance(held, str):
            return held
        if self._file is None:
            raise ValueError("the spool holding this record is closed")
        self._file.seek(held.offset)
        data = self._file.read(held.size)
        if len(data) != held.size:
            raise OSError(f"the attempt spool lost a record ({len(data)} of {held.size} bytes)")
        return data.decode("utf-8", errors="surrogatepass")

    @property
    def spooled_bytes(self) -> int:
        """Bytes written to the spool so far."""
        return self._end

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
