#!/usr/bin/env python3
"""Background-review digest vectors, computed independently of the Rust code.

Follows the text of the specification only:

- canonical JSON: docs/spec/runtime-protocol.md §17 (keys sorted by code point at every
  depth, no whitespace, UTF-8 without ASCII escaping, `/` not escaped, JavaScript number
  forms, integers beyond ±(2^53 − 1) rejected);
- params_digest, binding_digest, the summary: docs/spec/agent-jobs.md §9.3 and §9.11;
- the background confirmation record: §9.12.

Standard library only. Writes, next to this script:

- review_vectors.json: params (as the JSON text both sides parse) → canonical JSON, summary,
  params_digest, binding_digest; and inputs both sides must reject;
- review_records.json: one valid record and tampered copies, each with the id of the first
  check `openphone_jobs::review::check_stored` must name.

Run: python3 make_review_vectors.py   (the output is deterministic; commit both files)
"""

import hashlib
import json
import os

MAX_SAFE_INTEGER = 2**53 - 1
REVIEW_WINDOW_MS = 900_000


class Rejected(Exception):
    """The input has no canonical form."""


# --- canonical JSON (runtime-protocol.md §17) -------------------------------------------


def parse_strict(text):
    """JSON text → value; duplicate keys are refused (rule 1)."""

    def pairs(items):
        out = {}
        for key, value in items:
            if key in out:
                raise Rejected("duplicate_key")
            out[key] = value
        return out

    return json.loads(text, object_pairs_hook=pairs)


ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def canonical_string(s):
    out = ['"']
    for ch in s:
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            raise Rejected("unpaired_surrogate")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def shortest_digits(x):
    """(digits, n) of a positive finite double: the shortest round-trip digit string d1…dk and
    the decimal exponent n with x = 0.d1…dk × 10^n."""
    text = repr(x)  # Python's repr is the shortest string that round-trips
    if "e" in text:
        mantissa, exponent = text.split("e")
        exponent = int(exponent)
    else:
        mantissa, exponent = text, 0
    if "." in mantissa:
        whole, frac = mantissa.split(".")
    else:
        whole, frac = mantissa, ""
    digits = whole + frac
    n = len(whole) + exponent
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    return digits, n


def js_number(value):
    """A JSON number as JavaScript's Number-to-String writes the double (rule 6)."""
    if isinstance(value, bool):
        raise TypeError("not a number")
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise Rejected("unsafe_integer")
        return str(value)
    x = float(value)
    if x != x or x in (float("inf"), float("-inf")):
        raise Rejected("not_finite")
    if x == int(x) and abs(x) > MAX_SAFE_INTEGER:
        raise Rejected("unsafe_integer")
    if x == 0:
        return "0"  # also -0
    sign = "-" if x < 0 else ""
    digits, n = shortest_digits(abs(x))
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp = ("+" if e >= 0 else "-") + str(abs(e))
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + exp
    return sign + body


def canonical_json(value):
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return canonical_string(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value.keys())  # str comparison in Python is by code point
        return "{" + ",".join(canonical_string(k) + ":" + canonical_json(value[k]) for k in keys) + "}"
    raise TypeError(type(value))


# --- the digests (agent-jobs.md §9.11) --------------------------------------------------

TRIM = "".join(chr(c) for c in range(0x21))


def sha256_hex(text):
    return hashlib.sha256(text.strip(TRIM).encode("utf-8")).hexdigest()


def params_digest(tool, params):
    if not isinstance(params, dict):
        raise Rejected("not_an_object")
    return sha256_hex(tool + "\n" + canonical_json(params))


def binding_digest(job_id, runtime, phone_session_id, tool, p_digest, idempotency_key, expires_at):
    return sha256_hex(
        "\n".join([str(job_id), runtime, phone_session_id, tool, p_digest, idempotency_key, str(expires_at)])
    )


INVISIBLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0xE0000, 0xE0FFF),
]


def shown(c):
    """The one escape for what a person reads (openphone_protocol::display_text)."""
    n = ord(c)
    control = (n < 0x20 and c not in "\n\t") or 0x7F <= n <= 0x9F
    if control or n in (0x2028, 0x2029) or any(a <= n <= b for a, b in INVISIBLE):
        return "\\u{%04X}" % n
    return c


def summary(tool, params):
    text = tool.replace("_", " ") + " with " + canonical_json(params)
    text = "".join(shown(c) for c in text)
    return text[:1000]  # Python strings index code points


# --- the vectors ------------------------------------------------------------------------

BINDING = {
    "job_id": 42,
    "runtime": "builtin",
    "phone_session_id": "background-job:42",
    "idempotency_key": "job:42:7d3f8a52-95c4-4f55-9d4c-1b2e3f4a5b6c",
    "expires_at": 1760000900000,
}

CASES = [
    ("reference", "messages_send", '{"to":"+15551234567","body":"on my way"}'),
    (
        "unicode_and_escapes",
        "messages_send",
        '{"to":"Zo\\u00eb","body":"h\\u00e9llo \\"w\\u00f6rld\\" \\u2014 \\u4f60\\u597d \\ud83c\\udf89 a/b \\\\ '
        'tab\\tnl\\ncr\\r bs\\b ff\\f ctl\\u0001\\u001f del\\u007f","reason":"  spaced  "}',
    ),
    (
        "nested_objects_and_arrays",
        "calendar_create_event",
        '{"title":"Standup","start_at":"2026-01-05T09:00:00Z","reason":"r",'
        '"extra":{"z":[1,{"y":2,"x":[true,false,null]}],"a":{},"m":[[],[{}]]}}',
    ),
    (
        "numbers",
        "calendar_update_event",
        '{"event_id":7,"one":1.0,"neg_zero":-0,"neg_zero_f":-0.0,"thousand":1e3,"tenth":0.1,'
        '"small":1.5e-7,"tiny":1e-7,"micro":0.000001,"micro25":2.5e-6,"frac":123456789.125,'
        '"max_safe":9007199254740991,"min_safe":-9007199254740991,"subnormal":5e-324,'
        '"e18":1.23e-18,"third":0.3333333333333333,"neg":-42.5,"reason":"r"}',
    ),
    (
        "key_order_by_code_point",
        "messages_draft",
        '{"\\ud83d\\ude00":1,"\\uffff":2,"\\ue000":3,"\\u00e9":4,"a":5,"B":6,"":7,"aa":8,"a\\u0000":9,'
        '"body":"k","reason":"r"}',
    ),
    ("empty_strings_and_booleans", "set_clipboard", '{"text":"","sensitive":false,"reason":"r"}'),
    (
        "bidi_and_zero_width_shown_escaped",
        "messages_send",
        '{"to":"+1555\\u202e6660\\u202c","body":"pay\\u200bnow\\ufeff","reason":"r"}',
    ),
    ("long_summary", "messages_send", '{"to":"Alice","body":"' + "\\u00e9x" * 700 + '"}'),
]

REJECTED = [
    ("exponent_integral_1e21", "messages_send", '{"n":1e21}', "unsafe_integer"),
    ("integer_beyond_2_53", "messages_send", '{"n":9007199254740992}', "unsafe_integer"),
    ("duplicate_key", "messages_send", '{"a":1,"a":2}', "duplicate_key"),
    ("not_an_object", "messages_send", "[1,2]", "not_an_object"),
]


def vector(name, tool, text):
    params = parse_strict(text)
    digest = params_digest(tool, params)
    b = BINDING
    return {
        "name": name,
        "tool": tool,
        "params_text": text,
        "canonical": canonical_json(params),
        "summary": summary(tool, params),
        "params_digest": digest,
        "binding": dict(b),
        "binding_digest": binding_digest(
            b["job_id"], b["runtime"], b["phone_session_id"], tool, digest, b["idempotency_key"], b["expires_at"]
        ),
    }


def rejected(name, tool, text, why):
    try:
        params_digest(tool, parse_strict(text))
    except Rejected as e:
        assert str(e) == why, (name, e)
        return {"name": name, "tool": tool, "params_text": text, "rejected": why}
    raise AssertionError(name + " was not rejected")


# --- records (agent-jobs.md §9.12) -------------------------------------------------------


def record(job_id=42, tool="messages_send", params=None, created_at=1760000000000, window=REVIEW_WINDOW_MS,
           session=None, key="job:42:7d3f8a52-95c4-4f55-9d4c-1b2e3f4a5b6c"):
    """A record whose digests and summary are computed from its fields."""
    params = {"to": "+15551234567", "body": "on my way", "reason": "tell Sam"} if params is None else params
    session = "background-job:%d" % job_id if session is None else session
    expires_at = created_at + window
    p_digest = params_digest(tool, params)
    return {
        "schema": "openphone.background_confirmation.v1",
        "confirmation_id": "job-confirm-0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
        "job_id": job_id,
        "runtime": "builtin",
        "phone_session_id": session,
        "tool": tool,
        "params": params,
        "params_digest": p_digest,
        "binding_digest": binding_digest(job_id, "builtin", session, tool, p_digest, key, expires_at),
        "idempotency_key": key,
        "created_at": created_at,
        "expires_at": expires_at,
        "review_state": "pending",
        "summary": summary(tool, params),
    }


def tampered():
    out = []

    def add(name, rec, check):
        out.append({"name": name, "record": rec, "first_failure": check})

    r = record()
    r["params"] = dict(r["params"], body="transfer everything")  # changed after the digests
    add("params_changed", r, "record.params_digest")
    r = record()
    r["params_digest"] = hashlib.sha256(b"another").hexdigest()
    add("params_digest_changed", r, "record.params_digest")
    r = record()
    r["idempotency_key"] = "job:42:another"
    add("binding_field_changed", r, "record.binding_digest")
    r = record()
    r["binding_digest"] = "0" * 64
    add("binding_digest_changed", r, "record.binding_digest")
    add("window_longer_than_900000", record(window=REVIEW_WINDOW_MS + 1), "record.window")
    add("window_empty", record(window=0), "record.window")
    add("wrong_session", record(session="background-job:43"), "record.session")
    secret = {"to": "+15551234567", "body": "hi", "api_key": "sk-live-123", "reason": "r"}
    add("secret_in_params", record(params=secret), "record.blocked_material")
    bearer = {"to": "+15551234567", "body": "Bearer abc.def", "reason": "r"}
    add("bearer_in_params", record(params=bearer), "record.blocked_material")
    r = record()
    r["approved_by"] = "someone"
    add("unknown_member", r, "record.schema")
    r = record()
    r["params_digest"] = r["params_digest"].upper()
    add("digest_not_lowercase_hex", r, "record.schema")
    r = record()
    r["summary"] = "messages send with {}"
    add("summary_changed", r, "record.summary")
    r = record()
    r["decision"] = "approved"
    add("pending_with_a_decision", r, "record.lifecycle")
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    vectors = {
        "about": "Computed by make_review_vectors.py from the specification text (standard library only).",
        "vectors": [vector(*case) for case in CASES],
        "rejected": [rejected(*case) for case in REJECTED],
    }
    records = {
        "about": "A valid background confirmation record and tampered copies (make_review_vectors.py).",
        "valid": record(),
        "tampered": tampered(),
    }
    for name, data in (("review_vectors.json", vectors), ("review_records.json", records)):
        with open(os.path.join(here, name), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
