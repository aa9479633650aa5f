"""Run writes of the SQL store: creating or resuming a run, recording its cases and
attempts (one batch in one transaction), finishing it, its artifact inventory, and deleting
runs with the contents no run uses any more. A mixin over :class:`~goldeval.store.sql.SqlCore`
(see there for why the store is split this way)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from goldeval.store import counters
from goldeval.store.encoding import (
    Attempt,
    attempt_from_record,
    attempts_of_texts,
    case_texts,
    content_columns,
    finite,
    json_text,
    json_value,
    utcnow,
)
from goldeval.store.errors import RunConflictError, StoreError
from goldeval.store.migrations import RUN_STATUSES
from goldeval.store.pages import digest, externalise
from goldeval.store.rows import AttemptText, RunColumns, RunStatus, StoredRun
from goldeval.store.sharing import RunSharing
from goldeval.store.sql import (
    COLUMN_CACHE,
    INSERT_ATTEMPT,
    INSERT_CASE,
    INSERT_RUN,
    NEW_CASE_ONLY,
    UPSERT_ARTIFACT,
    UPSERT_ATTEMPT,
    UPSERT_DATASET,
    Tx,
    statuses_by_key,
)


class RunWrites(RunSharing):
    """Everything that writes a run."""

    def _stored_run(self, row: RunColumns, *, resumed: bool) -> StoredRun:
        return StoredRun(**self.run_identity(row), resumed=resumed)

    @contextmanager
    def _locked_run(self, op: str, run_id: str) -> Iterator[Tx]:
        """A write transaction on one run (its writer lock held: see ``_lock_run``)."""
        with self._transaction(op) as tx:
            if not self._lock_run(tx, run_id):
                raise StoreError(f"{op}: no run {run_id!r} in {self.url}")
            self._unshare(tx, run_id)
            yield tx

    def _write_cases(self, op: str, run_id: str, infos: list[tuple[str, str]]) -> int:
        if not infos:
            return 0
        with self._locked_run(op, run_id) as tx:
            return self._add_cases(tx, run_id, infos)

    def _add_cases(self, tx: Tx, run_id: str, infos: list[tuple[str, str]]) -> int:
        new: dict[str, str] = {}
        for case_id, text in infos:
            new.setdefault(case_id, text)  # the first info of a case counts, as before
        if not new:
            return 0
        digests = {case_id: digest(text) for case_id, text in new.items()}
        ids = self._content_ids(tx, {digests[c]: t for c, t in new.items()})
        rows = [(run_id, c, ids[digests[c]]) for c in new]
        return tx.insert_new(INSERT_CASE, INSERT_CASE + NEW_CASE_ONLY, rows)

    def _write_attempts(self, op: str, run_id: str, attempts: list[Attempt]) -> int:
        if not attempts:
            return 0
        with self._locked_run(op, run_id) as tx:
            return self._add_attempts(tx, run_id, attempts)

    def _add_attempts(self, tx: Tx, run_id: str, attempts: list[Attempt]) -> int:
        if not attempts:
            return 0
        keys = [digest(a.content) for a in attempts]
        ids = self._content_ids(tx, {k: a.content for k, a in zip(keys, attempts, strict=True)})
        made = [
            self._attempt_row(run_id, a, key, ids[key])
            for a, key in zip(attempts, keys, strict=True)
        ]
        rows = [row for row, _cost in made]
        stored: dict[Any, str] | None = None

        def read_stored() -> None:
            nonlocal stored
            stored = self._stored_statuses(tx, run_id, attempts)

        # A fresh run conflicts with nothing: a plain insert. A resumed run, a rerun of
        # errors or a re-sent report: the upsert keeps a stored attempt, except an ERROR
        # one, which a later non-ERROR attempt replaces.
        written = tx.insert_new(INSERT_ATTEMPT, UPSERT_ATTEMPT, rows, read_stored)
        batch: list[counters.Written] = [
            ((a.case_id, a.index, a.model), a.status, row[5], row[7], cost)
            for a, (row, cost) in zip(attempts, made, strict=True)
        ]
        counters.bump_run(tx, run_id, counters.run_count_deltas(batch, stored))
        # Last in the transaction, so /metrics never counts what was not committed.
        counters.bump(tx, counters.attempt_deltas(batch, stored))
        return written

    @staticmethod
    def _stored_statuses(tx: Tx, run_id: str, attempts: list[Attempt]) -> dict[Any, str]:
        """Status of the stored attempts of the batch's cases (the conflict path only)."""
        return statuses_by_key(tx, "?", run_id, [a.case_id for a in attempts])

    def _attempt_row(
        self, run_id: str, a: Attempt, key: bytes, content_id: int
    ) -> tuple[tuple[Any, ...], float | None]:
        """The attempts row of ``a`` and its estimated cost (counted, not stored)."""
        columns = self._columns.get(key)
        if columns is None:
            if len(self._columns) >= COLUMN_CACHE:
                self._columns.clear()
            columns = self._columns[key] = content_columns(a.content)
        error_kind, tokens, cost = columns
        row = (
            run_id,
            a.case_id,
            a.index,
            a.model,
            a.status,
            error_kind,
            a.duration_ms(),
            tokens,
            content_id,
            json_text(a.slim()),
            a.variant,
        )
        return row, cost

    def begin_run(
        self,
        run_id: str,
        *,
        run_key: str | None = None,
        dataset_id: str,
        dataset_hash: str,
        mode: str,
        model: str | None = None,
        protocol: Mapping[str, Any],
        configuration: Mapping[str, Any],
        dataset_source: str | None = None,
    ) -> StoredRun:
        now = utcnow()
        with self._transaction("begin_run") as tx:
            tx.execute(
                UPSERT_DATASET, (dataset_id, dataset_hash, dataset_source, self.ts_param(now))
            )
            existing = self._find(tx, "run_key", run_key) if run_key is not None else None
            if existing is None:
                inserted = tx.execute(
                    INSERT_RUN,
                    (
                        run_id,
                        run_key,
                        dataset_id,
                        dataset_hash,
                        mode,
                        model,
                        json_text(dict(protocol)),
                        json_text(dict(configuration)),
                        self.ts_param(now),
                    ),
                )
                if inserted == 1:
                    row = self._find(tx, "run_id", run_id)
                    assert row is not None
                    return self._stored_run(row, resumed=False)
                # Lost a race for the key (PostgreSQL), or the run id exists already.
                if run_key is not None:
                    existing = self._find(tx, "run_key", run_key)
                if existing is None:
                    existing = self._find(tx, "run_id", run_id)
                    if existing is None:
                        raise StoreError(f"begin_run: could not create run {run_id!r}")
                    if run_key is not None and existing.run_key != run_key:
                        raise RunConflictError(
                            f"run id {run_id!r} exists with run key {existing.run_key!r}, "
                            f"not {run_key!r}"
                        )
            if (existing.dataset_id, existing.dataset_hash) != (dataset_id, dataset_hash):
                name = f"run key {run_key!r}" if run_key is not None else f"run id {run_id!r}"
                raise RunConflictError(
                    f"{name} belongs to run {existing.run_id!r} of dataset "
                    f"{existing.dataset_id}@{str(existing.dataset_hash)[:12]}, "
                    f"not {dataset_id}@{dataset_hash[:12]}"
                )
            tx.execute(
                "UPDATE runs SET status = 'RUNNING', finished_at = NULL WHERE run_id = ?",
                (existing.run_id,),
            )
            row = self._find(tx, "run_id", existing.run_id)
            assert row is not None
            return self._stored_run(row, resumed=True)

    def record_case(self, run_id: str, case_info: Mapping[str, Any]) -> bool:
        return self.record_cases(run_id, [case_info]) == 1

    def record_cases(self, run_id: str, case_infos: Iterable[Mapping[str, Any]]) -> int:
        return self._write_cases("record_cases", run_id, case_texts(case_infos))

    def record_attempt_texts(self, run_id: str, rows: Iterable[AttemptText]) -> int:
        return self._write_attempts("record_attempts", run_id, attempts_of_texts(rows))

    def record_batch(
        self,
        run_id: str,
        case_infos: Iterable[Mapping[str, Any]],
        rows: Iterable[AttemptText],
    ) -> tuple[int, int]:
        infos = case_texts(case_infos)
        attempts = attempts_of_texts(rows)
        if not infos and not attempts:
            return 0, 0
        with self._locked_run("record_batch", run_id) as tx:
            return self._add_cases(tx, run_id, infos), self._add_attempts(tx, run_id, attempts)

    def record_attempt(self, run_id: str, record: Mapping[str, Any]) -> bool:
        attempt = attempt_from_record(record)
        return self._write_attempts("record_attempt", run_id, [attempt]) == 1

    def record_attempts(self, run_id: str, records: Iterable[Mapping[str, Any]]) -> int:
        attempts = [attempt_from_record(r) for r in records]
        return self._write_attempts("record_attempts", run_id, attempts)

    def finish_run(self, run_id: str, status: RunStatus, summary: Mapping[str, Any]) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} is not one of {RUN_STATUSES}")
        with self._transaction("finish_run") as tx:
            if not self._lock_run(tx, run_id):
                raise StoreError(f"finish_run: no run {run_id!r} in {self.url}")
            # Large values (the selected case ids...) are the same in every run of a dataset:
            # stored once, as contents, like the cases and records.
            texts: dict[bytes, str] = {}
            compact = externalise(finite(dict(summary)), texts)
            if texts:
                self._content_ids(tx, texts)
            tx.execute(
                "UPDATE runs SET status = ?, finished_at = ?, summary = ? WHERE run_id = ?",
                (status, self.ts_param(utcnow()), json_text(compact), run_id),
            )
            shared = status == "COMPLETED" and self._share_if_repeat(tx, run_id) is not None
        if shared:
            self._release_space()

    def record_artifacts(self, run_id: str, artifacts: Iterable[tuple[str, str, int]]) -> int:
        now = self.ts_param(utcnow())
        rows = [(run_id, str(path), str(sha), int(size), now) for path, sha, size in artifacts]
        if not rows:
            return 0
        with self._transaction("record_artifacts") as tx:
            return tx.executemany(UPSERT_ARTIFACT, rows)

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        ids = list(dict.fromkeys(run_ids))
        deleted = 0
        with self._transaction("delete_runs") as tx:
            self._gc_lock(tx)
            leaving = set(ids)
            for run_id in ids:
                self._hand_over(tx, run_id, leaving)
                # attempts, run_cases and artifacts go with the run (ON DELETE CASCADE).
                deleted += tx.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            referenced = {
                int(i)
                for (i,) in tx.query(
                    "SELECT content_id FROM attempts UNION SELECT content_id FROM run_cases"
                )
            }
            summaries = tx.query("SELECT summary FROM runs WHERE summary IS NOT NULL")
            in_summaries = self._stand_in_texts(tx, (json_value(r[0]) for r in summaries))
            keys = sorted(bytes.fromhex(k) for k in in_summaries)
            referenced.update(self._known_contents(tx, keys).values())
            unused = [
                (int(i),)
                for (i,) in tx.query("SELECT id FROM contents")
                if int(i) not in referenced
            ]
            if unused:
                tx.executemany("DELETE FROM contents WHERE id = ?", unused)
            tx.execute(
                "DELETE FROM datasets WHERE NOT EXISTS (SELECT 1 FROM runs"
                " WHERE runs.dataset_id = datasets.id AND runs.dataset_hash = datasets.hash)"
            )
        if deleted:
            self._release_space()
        return deleted
