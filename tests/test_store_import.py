"""``evictlab import deermem``: spec 1.14's layout and fact format, read strictly, without the text."""

from __future__ import annotations

import json

import pytest
from store_fixtures import SECRET, START, bucket_dir, render_fact, replayed_store, stored_fact, write_fact

from evictlab.analysis.traces.schema import read_trace
from evictlab.cli import main
from evictlab.core.stores.deermem import read_store, shard, user_dir_name
from evictlab.core.stores.imported import load_import
from evictlab.core.tokens import char_tokens, content_digest, count_tokens, fact_line, token_counter

SPEC_EXAMPLE = """---
id: fact_1a2b3c4d
category: preference
confidence: 0.92
createdAt: '2026-05-01T09:30:00Z'
source:
  type: conversation
  threadId: thread-demo-0001
expected_valid_days: 365
schemaVersion: 2
status: active
topics: []
consolidatedFrom: []
updatedAt: '2026-05-01T09:30:00Z'
revision: 1
user_id: demo-user
agent_name: __default__
---

# (Invented) User prefers metric units in travel plans

(Invented) User prefers metric units in travel plans
"""


def test_token_counting_follows_the_char_rule_when_tiktoken_is_not_there():
    assert char_tokens("\n") == 0 and char_tokens("Facts:\n") == 1 and char_tokens("中文测试abcd") == 3
    counter = token_counter("char")
    assert counter.method == "char" and counter.count("abcdefgh") == 2
    assert count_tokens("中文测试abcd", "char") == 3
    with pytest.raises(ValueError, match="token counting"):
        token_counter("words")


def test_the_spec_example_and_the_minimal_form_load(tmp_path):
    path = tmp_path / "users/demo-user/agents/__default__/facts/55/fact_1a2b3c4d.md"
    assert shard("fact_1a2b3c4d") == "55" and user_dir_name("alice@example.com") == "alice-example-com-ff8d9819fc0e12bf"
    path.parent.mkdir(parents=True)
    path.write_text(SPEC_EXAMPLE)
    minimal = tmp_path / f"agents/__default__/facts/{shard('m1')}/m1.md"
    minimal.parent.mkdir(parents=True)
    minimal.write_text("---\nid: m1\nuser_id: null\nagent_name: __DEFAULT__\ncreatedAt: '2026-05-02T00:00:00Z'\n"
                       "---\nx\n")
    store = read_store(tmp_path, token_counting="char")
    assert store.problems == [] and [bucket.key for bucket in store.buckets] == ["__default__", "demo-user/__default__"]
    fact = store.buckets[1].facts[0]
    assert fact == {
        "id": "fact_1a2b3c4d", "category": "preference", "confidence": 0.92, "createdAt": "2026-05-01T09:30:00Z",
        "updatedAt": "2026-05-01T09:30:00Z", "revision": 1, "expected_valid_days": 365, "consolidatedFrom": [],
        "source": {"type": "conversation", "threadId": "thread-demo-0001"},
        "content_tokens": char_tokens("(Invented) User prefers metric units in travel plans"), "content_length": 52,
        "line_tokens": char_tokens("\n- [preference | 0.92] (Invented) User prefers metric units in travel plans"),
        "content_key": content_digest("(invented) user prefers metric units in travel plans"),
    }  # fmt: skip
    assert store.buckets[0].facts[0]["confidence"] == 0.5  # the default
    assert str(store.clock.date()) == "2026-05-02"


def test_a_round_trip_gives_the_same_facts(tmp_path):
    written = {}
    for index in range(40):
        fact = stored_fact(f"fact_{index:08x}", round(0.5 + index / 100, 2), START, category="correction" if index % 7
                           else "Knowledge", lastConfirmedAt="2026-03-02T00:00:00Z", confirmationCount=index + 1)
        content = f"{SECRET} {'长' * index} #{index}"
        write_fact(tmp_path / "store", fact, content, "alice@example.com", "Coder")
        written[fact["id"]] = (fact, content)
    out = tmp_path / "out"
    assert main(["import", "deermem", str(tmp_path / "store"), "--output-dir", str(out), "--token-counting", "char",
                 "--user", "alice@example.com", "--agent", "CODER"]) == 0  # fmt: skip
    (bucket,) = load_import(out).buckets
    assert bucket.key == f"{user_dir_name('alice@example.com')}/coder" and bucket.user_id == "alice@example.com"
    for fact in bucket.facts:
        original, content = written[fact["id"]]
        expected = {key: original[key] for key in ("id", "confidence", "createdAt", "updatedAt", "revision",
                                                    "lastConfirmedAt", "confirmationCount", "source")}  # fmt: skip
        assert {key: fact[key] for key in expected} == expected
        assert fact["content_tokens"] == char_tokens(content) and fact["content_length"] == len(content)
        if original["category"] == "Knowledge":  # storage's rewrite of a category outside the nine
            assert (fact["category"], fact["categoryExtension"]) == ("other", "Knowledge")
        else:
            assert fact["category"] == "correction"


# Each malformed case of spec 1.14 with the field the refusal must name. (A repeated front-matter
# key is not one: YAML's safe_load reads the last value; tests/test_user_files.py.)
MALFORMED = {
    "no front matter": ("just text\n", "no front matter"),
    "no closing delimiter": ("---\nid: X\n", "no front matter"),
    "not a mapping": ("---\n- a\n- b\n---\nbody\n", "not a YAML mapping"),
    "bad yaml": ("---\nid: [X\n---\nbody\n", "not valid YAML"),
    "id differs from stem": ("---\nid: other_id\n{scope}createdAt: '2026-01-01T00:00:00Z'\n---\nb\n", "field 'id'"),
    "id missing": ("---\n{scope}createdAt: '2026-01-01T00:00:00Z'\n---\nb\n", "field 'id'"),
    "unquoted timestamp": ("---\nid: X\n{scope}createdAt: 2026-01-01T00:00:00Z\n---\nb\n",
                           "field 'createdAt': must be a quoted string, got an unquoted YAML timestamp"),
    "unquoted confirmation": ("---\nid: X\n{scope}lastConfirmedAt: 2026-01-01\n---\nb\n", "field 'lastConfirmedAt'"),
    "wrong user": ("---\nid: X\nuser_id: mallory\nagent_name: __default__\n---\nb\n", "field 'user_id'"),
    "no user": ("---\nid: X\nagent_name: __default__\n---\nb\n", "field 'user_id'"),
    "wrong agent": ("---\nid: X\nuser_id: demo-user\nagent_name: other\n---\nb\n", "field 'agent_name'"),
    "category not a string": ("---\nid: X\n{scope}category: 9\n---\nb\n", "field 'category'"),
    "confidence above 1": ("---\nid: X\n{scope}confidence: 1.5\n---\nb\n", "field 'confidence'"),
    "confidence a bool": ("---\nid: X\n{scope}confidence: true\n---\nb\n", "field 'confidence'"),
    "confidence a string": ("---\nid: X\n{scope}confidence: '0.9'\n---\nb\n", "field 'confidence'"),
    "status": ("---\nid: X\n{scope}status: deleted\n---\nb\n", "field 'status'"),
    "topics": ("---\nid: X\n{scope}topics: [1, 2]\n---\nb\n", "field 'topics'"),
    "revision": ("---\nid: X\n{scope}revision: 0\n---\nb\n", "field 'revision'"),
    "confirmation count": ("---\nid: X\n{scope}confirmationCount: 0\n---\nb\n", "field 'confirmationCount'"),
    "source": ("---\nid: X\n{scope}source: {type: 3}\n---\nb\n", "field 'source'"),
    "id not a string": ("---\nid: 7\n{scope}---\nb\n", "field 'id'"),
    "id of other characters": ("---\nid: X.x\n{scope}---\nb\n", "field 'id'"),
    "no agent": ("---\nid: X\nuser_id: demo-user\n---\nb\n", "field 'agent_name'"),
    "unquoted update": ("---\nid: X\n{scope}updatedAt: 2026-01-01T00:00:00Z\n---\nb\n", "field 'updatedAt'"),
    "consolidatedAt": ("---\nid: X\n{scope}consolidatedAt: 5\n---\nb\n", "field 'consolidatedAt'"),
    "consolidatedFrom": ("---\nid: X\n{scope}consolidatedFrom: fact_a\n---\nb\n", "field 'consolidatedFrom'"),
    "categoryExtension": ("---\nid: X\n{scope}categoryExtension: [a]\n---\nb\n", "field 'categoryExtension'"),
    "confidence below 0": ("---\nid: X\n{scope}confidence: -0.1\n---\nb\n", "field 'confidence'"),
    "revision a bool": ("---\nid: X\n{scope}revision: true\n---\nb\n", "field 'revision'"),
    "thread id": ("---\nid: X\n{scope}source: {type: conversation, threadId: 5}\n---\nb\n", "field 'source'"),
}
SCOPE = "user_id: demo-user\nagent_name: __default__\n"
# The cases the fixture writes as whole files or folders, with what the refusal must say.
OTHER_CASES = {"not UTF-8": "not UTF-8", "over 4 MiB": "4 MiB", "an id twice": "is also the id of",
               "a user in the no-user tree": "field 'user_id': must be null", "agent folder": "is not [A-Za-z0-9-]+"}


@pytest.fixture
def broken_store(tmp_path):
    root = tmp_path / "store"
    write_fact(root, stored_fact("fact_good", 0.9, START), SECRET)
    paths = {}
    for number, (case, (text, _)) in enumerate(MALFORMED.items()):
        stem = f"bad_{number:02d}"
        path = bucket_dir(root, "demo-user", "__default__") / "facts" / shard(stem) / f"{stem}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("X", stem).replace("{scope}", SCOPE) + SECRET + "\n")
        paths[case] = path
    latin = bucket_dir(root, "demo-user", "__default__") / "facts" / "00" / "latin.md"
    latin.parent.mkdir(exist_ok=True)
    latin.write_bytes(b"---\nid: latin\n---\n\xe9\n")
    paths["not UTF-8"] = latin
    huge = latin.with_name("huge.md")
    with huge.open("wb") as handle:
        handle.truncate(4 * 2**20 + 1)  # sparse: a fact file over the 4 MiB bound
    paths["over 4 MiB"] = huge
    twin = bucket_dir(root, "demo-user", "__default__") / "facts" / "zz" / "fact_good.md"
    twin.parent.mkdir()
    twin.write_text(render_fact(stored_fact("fact_good", 0.5, START), SECRET, "demo-user", "__default__"))
    paths["an id twice"] = twin
    legacy = write_fact(root, stored_fact("fact_nouser", 0.9, START), SECRET, None, "__default__")
    legacy.write_text(legacy.read_text().replace("user_id: null", "user_id: demo-user"))
    paths["a user in the no-user tree"] = legacy
    agent = write_fact(root, stored_fact("fact_agent", 0.9, START), SECRET, "demo-user", "__default__")
    paths["agent folder"] = agent.parents[3] / "Bad_Agent"  # agent folders are [a-z0-9-]+ or __default__
    (paths["agent folder"] / "facts" / agent.parent.name).mkdir(parents=True)
    agent.rename(paths["agent folder"] / "facts" / agent.parent.name / agent.name)
    return root, paths


def test_every_malformed_file_is_named_with_its_field_and_nothing_is_imported(broken_store, tmp_path, capsys):
    root, paths = broken_store
    out = tmp_path / "out"
    assert main(["import", "deermem", str(root), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("refused: ")]
    assert len(lines) == len(paths)
    for case, path in paths.items():
        (line,) = [line for line in lines if f"{path}:" in line]
        assert MALFORMED.get(case, (None, OTHER_CASES.get(case)))[1] in line, (case, line)
    assert "fails the whole agent read" in err and "--skip-invalid" in err
    assert not out.exists()  # refused before the run started: no trace
    assert SECRET not in err and "flowerpot" not in err


def test_skip_invalid_imports_the_rest_and_records_what_it_left_out(broken_store, tmp_path, capsys):
    root, paths = broken_store
    out = tmp_path / "out"
    assert main(["import", "deermem", str(root), "--output-dir", str(out), "--skip-invalid"]) == 0
    captured = capsys.readouterr()
    store = load_import(out)
    assert [fact["id"] for bucket in store.buckets for fact in bucket.facts] == ["fact_good"]
    assert len(store.problems) == len(paths)
    record = json.loads((out / "import-deermem.run.json").read_text())
    assert record["status"] == "success" and record["summary"]["refused"] == len(paths)
    assert main(["import", "deermem", str(root), "--output-dir", str(out), "--skip-invalid"]) == 2  # finished run
    for text in [captured.out, captured.err, *(path.read_text() for path in out.rglob("*") if path.is_file())]:
        assert "flowerpot" not in text


def test_a_replayed_store_imports_without_text_and_its_trace_reads_back(tmp_path, capsys):
    replayed = replayed_store(tmp_path / "store", "confidence", shadow=True, seed=3)
    noisy = bucket_dir(tmp_path / "store", "demo-user", "__default__") / "facts" / "zz"
    noisy.mkdir()  # a file in the wrong shard loads, with a note
    fact = stored_fact("fact_misplaced", 0.8, START)
    (noisy / "fact_misplaced.md").write_text(SPEC_EXAMPLE.replace("fact_1a2b3c4d", "fact_misplaced"))
    out = tmp_path / "out"
    assert main(["import", "deermem", str(tmp_path / "store"), "--output-dir", str(out)]) == 0
    captured = capsys.readouterr()
    assert "in shard zz" in captured.err and fact["id"] in captured.err
    (bucket,) = load_import(out).buckets
    assert {f["id"] for f in bucket.facts} == {*replayed["facts"], "fact_misplaced"}
    assert bucket.audit == replayed["audit"] and bucket.usage == replayed["usage"]
    trace = read_trace(out / "traces/demo-user/__default__.jsonl")
    assert trace["event"].count("add") == len(bucket.facts)
    assert sum(1 for kind in trace["event"] if kind == "search") >= len(bucket.usage)
    every = [captured.out, captured.err, *(path.read_text() for path in out.rglob("*") if path.is_file())]
    assert not any(word in text for text in every for word in ("flowerpot", "spare key", "metric units"))


def test_an_unreadable_sidecar_reads_as_empty_with_a_note(tmp_path, capsys):
    write_fact(tmp_path, stored_fact("fact_a", 0.9, START), "x")
    metadata = bucket_dir(tmp_path, "demo-user", "__default__") / ".metadata"
    metadata.mkdir()
    (metadata / "eviction-audit.json").write_text("{not json")
    (metadata / "fact-usage.json").write_text("[]")
    store = read_store(tmp_path)
    assert store.buckets[0].audit == [] and store.buckets[0].usage == {}
    assert any("eviction-audit.json" in note and "read as empty" in note for note in store.notes)
    assert any("fact-usage.json" in note and "not a JSON object" in note for note in store.notes)


def test_a_store_mid_commit_or_due_for_migration_reads_with_a_note(tmp_path):
    write_fact(tmp_path, stored_fact("fact_a", 0.9, START), "x", agent="lead-agent")
    write_fact(tmp_path, stored_fact("fact_b", 0.9, START), "x", agent="coder")
    (bucket_dir(tmp_path, "demo-user", "coder") / "memory.json").write_text("{}")
    (tmp_path / "users" / "demo-user" / ".memory.journal.json").write_text("{}")
    notes = read_store(tmp_path).notes
    assert any("unfinished commit" in note for note in notes)
    assert sum("migrates this bucket" in note for note in notes) == 2


def test_an_edited_snapshot_is_refused(tmp_path):
    write_fact(tmp_path / "store", stored_fact("fact_a", 0.9, START), "x")
    out = tmp_path / "out"
    assert main(["import", "deermem", str(tmp_path / "store"), "--output-dir", str(out)]) == 0
    with (out / "facts.jsonl").open("a") as handle:
        handle.write("\n")
    with pytest.raises(Exception, match="changed since the import"):
        load_import(out)


def test_crlf_files_and_a_missing_store_or_bucket(tmp_path, capsys):
    path = write_fact(tmp_path / "store", stored_fact("fact_a", 0.9, START), "line one\nline two")
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert read_store(tmp_path / "store").buckets[0].facts[0]["content_length"] == len("line one\nline two")
    assert main(["import", "deermem", str(tmp_path / "nowhere"), "--output-dir", str(tmp_path / "o1")]) == 2
    assert "not a DeerMem store folder" in capsys.readouterr().err
    assert main(["import", "deermem", str(tmp_path / "store"), "--agent", "nobody", "--output-dir",
                 str(tmp_path / "o2")]) == 2  # fmt: skip
    assert "no agent bucket for agent 'nobody'" in capsys.readouterr().err


def test_an_imported_trace_carries_token_counts_and_content_keys_and_the_replay_names_the_rule(tmp_path):
    """Spec 1.13's rule on each fact's injection line (here the character rule: tiktoken is not
    installed, or --token-counting char), 1.12 C5.4's key as a digest; the replay's record says which rule."""
    facts = [(stored_fact("fact_a", 0.9, START), "User likes Python"),
             (stored_fact("fact_b", 0.8, START, category="correction", sourceError="used pip"), "Use uv"),
             (stored_fact("fact_c", 0.95, START), "  user LIKES python ")]
    for fact, content in facts:
        write_fact(tmp_path / "store", fact, content)
    out = tmp_path / "out"
    argv = ["import", "deermem", str(tmp_path / "store"), "--output-dir", str(out), "--token-counting", "char"]
    assert main(argv) == 0
    trace = read_trace(out / "traces/demo-user/__default__.jsonl")
    adds = {trace["fact_id"][i]: i for i, kind in enumerate(trace["event"]) if kind == "add"}
    for fact, content in facts:
        line = fact_line(fact.get("category", "context"), fact["confidence"], content, fact.get("sourceError", ""))
        assert trace["tokens"][adds[fact["id"]]] == char_tokens("\n" + line)
        assert trace["content_key"][adds[fact["id"]]] == content_digest(content)
    assert trace["content_key"][adds["fact_a"]] == trace["content_key"][adds["fact_c"]]  # a duplicate
    assert main(["trace", "replay", "--trace", str(out), "--policies", "confidence,hybrid-v1", "--capacities", "10",
                 "--no-progress", "--output-dir", str(tmp_path / "replay")]) == 0
    record = json.loads((tmp_path / "replay" / "trace-replay.run.json").read_text())
    assert record["parameters"]["token_counting"] == {str(out): "char"}
