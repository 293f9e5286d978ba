"""The log API's pure parts: the query (one-line mistakes naming parameter, value and rule),
an attempt's log location, and the bounded fan-out of one stream to many readers."""

from __future__ import annotations

import pytest

from argus.core.fanout import Broadcast, FollowerLimit, skip_marker
from argus.core.logquery import LogQuery, LogQueryError, attempt_log, parse_log_query, tail_text


def test_query_defaults_and_values() -> None:
    assert parse_log_query({}) == LogQuery()
    q = parse_log_query([("follow", "true"), ("tailLines", "5"), ("attempt", "2"), ("sinceSeconds", "60")])
    assert q == LogQuery(follow=True, tail_lines=5, attempt=2, since_seconds=60)
    assert parse_log_query(q.params()) == q
    assert parse_log_query({"follow": "false"}).follow is False
    assert parse_log_query({"tailLines": "0"}).tail_lines == 0


@pytest.mark.parametrize("items, message", [
    ({"tailLines": "-1"}, "tailLines: '-1': must be a whole number from 0 to 1000000"),
    ({"tailLines": "ten"}, "tailLines: 'ten': must be a whole number from 0 to 1000000"),
    ({"tailLines": "1.5"}, "tailLines: '1.5': must be a whole number from 0 to 1000000"),
    ({"attempt": "0"}, "attempt: '0': must be a whole number, 1 or more"),
    ({"sinceSeconds": "0"}, "sinceSeconds: '0': must be a whole number of seconds, 1 or more"),
    ({"follow": "yes please"}, "follow: 'yes please': must be true or false"),
    ({"tail": "5"}, "tail: '5': unknown parameter; allowed: follow, tailLines, attempt, sinceSeconds"),
    ([("tailLines", "1"), ("tailLines", "2")], "tailLines: '2': given more than once"),
])
def test_query_mistakes_are_one_line(items, message) -> None:
    with pytest.raises(LogQueryError) as err:
        parse_log_query(items)
    assert str(err.value) == message and "\n" not in str(err.value)


def test_tail_text() -> None:
    assert tail_text("a\nb\nc\n", 2) == "b\nc\n"
    assert tail_text("a\nb\nc", 1) == "c"
    assert tail_text("a\n", 0) == "" and tail_text("a\n", None) == "a\n" and tail_text("a\n", 9) == "a\n"


STATUS = {"attempt": 2, "rayJob": {"submissionId": "sid-2"},
          "attempts": [{"attempt": 1, "submissionId": "sid-1"}, {"attempt": 2, "submissionId": "sid-2"}],
          "jobDir": {"userPath": "$HOME/jobs/ns-t-1234", "jobPath": "/private/users/alice/jobs/ns-t-1234"}}


def test_attempt_log() -> None:
    cur = attempt_log(STATUS, None)
    assert (cur.attempt, cur.submission_id, cur.current) == (2, "sid-2", True)
    assert cur.user_path == "$HOME/jobs/ns-t-1234/attempt-2.log" and cur.job_path == "/private/users/alice/jobs/ns-t-1234/attempt-2.log"
    first = attempt_log(STATUS, 1)
    assert (first.submission_id, first.current, first.job_path.endswith("attempt-1.log")) == ("sid-1", False, True)
    with pytest.raises(LogQueryError, match=r"^attempt: '3': the task has had 2 attempt\(s\)$"):
        attempt_log(STATUS, 3)
    assert attempt_log({}, None) == attempt_log({}, None) and attempt_log({}, None).submission_id is None


def test_every_reader_gets_the_stream_from_its_start() -> None:
    b = Broadcast(reader_limit=100)
    early = b.join()
    b.publish("one\n")
    late = b.join()
    snapshot = b.join(start=2)  # printed the log up to offset 2 already: the recent characters fill in
    b.publish("two\n")
    assert "".join(early.take()) == "one\ntwo\n"
    assert "".join(late.take()) == "two\n"
    assert "".join(snapshot.take()) == "e\ntwo\n"
    ahead = b.join(start=20)  # a snapshot longer than what the stream has shown yet
    b.publish("three\n")  # offsets 8..14
    assert ahead.take() == []
    b.publish("four-is-long\n")  # 14..27: from 20 on
    assert "".join(ahead.take()) == "s-long\n"


def test_only_the_recent_characters_are_kept() -> None:
    b = Broadcast(reader_limit=100, recent_limit=10)
    for i in range(10):
        b.publish(f"line{i}\n")  # 6 characters each
    assert b.recent_chars <= 10 + 6 and b.offset == 60
    late = b.join(start=0)  # far behind: what is kept, after a marker for the rest
    out = late.take()
    assert out[0] == skip_marker(48) and "".join(out[1:]) == "line8\nline9\n"


def test_a_reconnect_does_not_repeat_the_log() -> None:
    b = Broadcast()
    r = b.join(start=0)
    b.publish("abc")
    b.publish("def")
    b.restart()  # Ray's stream starts from the beginning again
    b.publish("ab")
    b.publish("cdefXY")
    b.publish("Z")
    assert "".join(r.take()) == "abcdefXYZ" and b.offset == 9


def test_a_slow_reader_skips_with_a_marker_and_never_holds_more_than_its_limit() -> None:
    b = Broadcast(reader_limit=10)
    slow, fast = b.join(), b.join()
    for _ in range(5):
        b.publish("12345\n")
        assert "".join(fast.take()) == "12345\n"
        assert slow.pending_chars <= 10
    out = slow.take()
    assert out[0] == skip_marker(24) and "".join(out[1:]) == "12345\n"
    b.publish("x\n")
    assert slow.take() == ["x\n"]
    b.close()
    assert slow.closed and fast.closed and b.join().closed
    b.leave(slow)
    assert slow not in b.readers


def test_follower_limit_per_user() -> None:
    limit = FollowerLimit(2)
    assert limit.acquire("alice") and limit.acquire("alice") and not limit.acquire("alice")
    assert limit.acquire("bob")
    limit.release("alice")
    assert limit.acquire("alice")
    limit.release("bob")
    assert "bob" not in limit.active
    assert all(FollowerLimit(0).acquire("x") for _ in range(100))
