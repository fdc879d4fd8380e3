#!/usr/bin/env python3
"""Translations across dialects through `airetry serve`, against `airetry mock`.

    python3 tests/translations/test_translations.py PATH/TO/airetry [NAME-SUBSTRING...]

Through the canonical hub (src/codec/hub.c): structured output both ways (an OpenAI
caller's response_format to an Anthropic target through the forced tool and
natively; an Anthropic caller's output_config.format to an OpenAI target),
reasoning effort <-> thinking, thinking with a schema in tool mode skipped,
Claude Code's request (a system message inside messages, adaptive thinking,
output_config.effort, context_management, cache_control, defer_loading) in
front of an OpenAI upstream, and "primary down, fallback in the other
dialect" giving the answer, not a 400. The mock answers schema JSON
(`@json`: the instance of the requested schema, from response_format,
output_config.format or a forced tool) and reasoning (`@reason=N`).

Everything runs on 127.0.0.1 ephemeral ports; the suite stops what it
started. Prints one "ok"/"FAIL" line per test and exits 1 when any failed.
"""

import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import airtest  # noqa: E402
from airtest import LOCAL, check, sse  # noqa: E402

WORK = airtest.init("translations")
HERE = os.path.dirname(os.path.abspath(__file__))
CLAUDE_CODE = os.path.join(HERE, "..", "data", "codec_diff", "requests",
                           "claude_code.anthropic.json")

SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
          "required": ["city", "temp"]}
INSTANCE = '{"city": "x", "temp": 1}'


def request(port, path, body, headers=None):
    """One POST on a fresh connection; (status, headers dict, body bytes)."""
    return airtest.fetch(port, "POST", path, body, headers, timeout=20)


def openai(port, body):
    return request(port, "/v1/chat/completions", body)


def anthropic(port, body):
    return request(port, "/v1/messages", body, {"anthropic-version": "2023-06-01"})


def openai_stream_text(raw):
    """(content, reasoning, finish, tool_calls seen) of an OpenAI stream."""
    text, reasoning, finish, tools = "", "", None, False
    events = sse(raw)
    check(events and events[-1][1] == "[DONE]", "no [DONE]: %r" % raw[-300:])
    for _, data in events[:-1]:
        obj = json.loads(data)
        check("error" not in obj, "error chunk: %s" % data)
        for ch in obj.get("choices", []):
            d = ch.get("delta", {})
            text += d.get("content") or ""
            reasoning += d.get("reasoning_content") or ""
            tools = tools or bool(d.get("tool_calls"))
            finish = ch.get("finish_reason") or finish
    return text, reasoning, finish, tools


def anthropic_stream(raw):
    """(text, thinking, stop_reason, block types) of an Anthropic stream."""
    text, thinking, stop, types = "", "", None, []
    events = sse(raw)
    check(events and events[-1][0] == "message_stop", "no message_stop: %r" % raw[-300:])
    for name, data in events:
        obj = json.loads(data)
        check(name != "error", "error event: %s" % data)
        if name == "content_block_start":
            types.append(obj["content_block"]["type"])
        elif name == "content_block_delta":
            d = obj["delta"]
            text += d.get("text", "")
            thinking += d.get("thinking", "")
        elif name == "message_delta":
            stop = obj["delta"].get("stop_reason") or stop
    return text, thinking, stop, types


# ---- the setup --------------------------------------------------------------------


class Env:
    def __init__(self, binary):
        script = os.path.join(WORK, "mock.yaml")
        with open(script, "w") as f:
            # A native target that refuses the schema once (then answers
            # JSON: the forced tool's call when the request forces one).
            f.write("""models:
  schema400:
    json: true
    attempts:
      - status: 400
        body: '{"type":"error","error":{"type":"invalid_request_error","message":"output_config.format.schema: unsupported keyword"}}'
""")
        mport = airtest.Proc("mock", [binary, "mock", "--listen", LOCAL + ":0", "--script",
                                      script]).port
        self.mock_port = mport
        cfg = """providers:
  - {name: oa, api: openai, base_url: "http://127.0.0.1:%(p)d/v1"}
  - {name: an, api: anthropic, base_url: "http://127.0.0.1:%(p)d"}
routes:
  - {name: json-tool, targets: [an/m@json]}
  - name: json-native
    targets: [{target: an/m@json, structured_output: native}]
  - {name: oa-json, targets: [oa/m@json]}
  - {name: reason-an, targets: [an/m@reason=2]}
  - {name: reason-oa, targets: [oa/m@reason=2]}
  - name: json-native-400
    targets: [{target: an/schema400, structured_output: native}]
  - {name: skip-only, targets: [an/m]}
  - {name: skip-fallback, targets: [an/m, oa/m2@json]}
  - {name: down-json, targets: [oa/down@503, an/m@json]}
  - {name: down-oa, targets: [an/down@503, oa/m]}
""" % {"p": mport}
        path = os.path.join(WORK, "gw.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        self.gw = airtest.Proc("gateway", [binary, "serve", "--config", path, "--listen",
                                           LOCAL + ":0"])
        self.port = self.gw.port


TESTS, test = airtest.registry()


def oa_json_body(model, stream):
    return {"model": model, "stream": stream,
            "messages": [{"role": "user", "content": "Weather?"}],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "weather", "schema": SCHEMA,
                                                "strict": True}}}


@test("structured output: OpenAI caller, Anthropic target, forced tool")
def t_json_tool(env):
    st, hs, body = openai(env.port, oa_json_body("json-tool", False))
    check(st == 200, "status %d: %s" % (st, body[:500]))
    msg = json.loads(body)["choices"][0]
    check(msg["message"].get("content") == INSTANCE, "content %r" % msg["message"])
    check(not msg["message"].get("tool_calls"), "tool calls leaked: %r" % msg)
    check(msg["finish_reason"] == "stop", "finish %r" % msg["finish_reason"])
    st, hs, body = openai(env.port, oa_json_body("json-tool", True))
    check(st == 200, "status %d" % st)
    text, _, finish, tools = openai_stream_text(body)
    check(text == INSTANCE and finish == "stop" and not tools,
          "stream: %r %r %r" % (text, finish, tools))


@test("structured output: OpenAI caller, Anthropic target, native")
def t_json_native(env):
    st, _, body = openai(env.port, oa_json_body("json-native", False))
    check(st == 200, "status %d: %s" % (st, body[:500]))
    msg = json.loads(body)["choices"][0]
    check(msg["message"].get("content") == INSTANCE, "content %r" % msg["message"])


@test("structured output: a native target's schema 400 falls back to the tool once")
def t_json_native_fallback(env):
    st, hs, body = openai(env.port, oa_json_body("json-native-400", False))
    check(st == 200, "status %d: %s" % (st, body[:500]))
    msg = json.loads(body)["choices"][0]
    check(msg["message"].get("content") == INSTANCE, "content %r" % msg["message"])
    check(hs.get("x-airetry-attempts") == "1", "attempts %r" % hs.get("x-airetry-attempts"))
    log = {"attempts": airtest.mock_log(env.mock_port)}
    seen = [(a["attempt"], a["status"]) for a in log["attempts"]
            if a["model"] == "schema400"]
    check(seen == [(1, 400), (2, 200)], "mock saw %r" % seen)


@test("structured output: Anthropic caller, OpenAI target")
def t_json_reverse(env):
    body = {"model": "oa-json", "max_tokens": 100,
            "messages": [{"role": "user", "content": "Weather?"}],
            "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}}
    st, _, raw = anthropic(env.port, body)
    check(st == 200, "status %d: %s" % (st, raw[:500]))
    content = json.loads(raw)["content"]
    check(content and content[0]["type"] == "text" and content[0]["text"] == INSTANCE,
          "content %r" % content)


@test("reasoning: OpenAI reasoning_effort to an Anthropic target")
def t_effort(env):
    body = {"model": "reason-an", "stream": True, "reasoning_effort": "low",
            "messages": [{"role": "user", "content": "Think."}]}
    st, _, raw = openai(env.port, body)
    check(st == 200, "status %d: %s" % (st, raw[:500]))
    text, reasoning, finish, _ = openai_stream_text(raw)
    check(reasoning == "Thinking 1. step 2.", "reasoning %r" % reasoning)
    check(text.startswith("[m@reason=2]") and finish == "stop", "text %r %r" % (text, finish))


@test("reasoning: Anthropic thinking to an OpenAI target")
def t_thinking(env):
    for thinking in ({"type": "enabled", "budget_tokens": 2048}, {"type": "adaptive"}):
        body = {"model": "reason-oa", "max_tokens": 4096, "stream": True,
                "thinking": thinking, "output_config": {"effort": "medium"},
                "messages": [{"role": "user", "content": "Think."}]}
        st, _, raw = anthropic(env.port, body)
        check(st == 200, "status %d: %s" % (st, raw[:500]))
        text, thought, stop, types = anthropic_stream(raw)
        check(thought == "Thinking 1. step 2." and types[:1] == ["thinking"],
              "thinking %r %r" % (thought, types))
        check(text.startswith("[m@reason=2]") and stop == "end_turn", "text %r %r" % (text, stop))


@test("thinking with a schema in tool mode is skipped")
def t_skip(env):
    body = oa_json_body("skip-only", False)
    body["reasoning_effort"] = "high"
    st, _, raw = openai(env.port, body)
    check(st == 400, "status %d: %s" % (st, raw[:500]))
    err = json.loads(raw)["error"]
    check("reasoning_effort with response_format" in err["message"], "message %r" % err)
    att = err.get("attempts", [])
    check(len(att) == 1 and att[0].get("outcome") == "skipped", "attempts %r" % att)
    body["model"] = "skip-fallback"
    st, hs, raw = openai(env.port, body)
    check(st == 200, "status %d: %s" % (st, raw[:500]))
    check(hs.get("x-airetry-target") == "oa/m2@json", "target %r" % hs.get("x-airetry-target"))
    check(hs.get("x-airetry-attempts") == "1", "attempts %r" % hs.get("x-airetry-attempts"))


@test("primary down, fallback in the other dialect: the answer, not a 400")
def t_fallback(env):
    body = oa_json_body("down-json", False)
    body.update({"seed": 7, "logprobs": True, "top_logprobs": 2,
                 "service_tier": "auto", "prompt_cache_key": "k",
                 "metadata": {"app": "t"}})
    st, hs, raw = openai(env.port, body)
    check(st == 200, "status %d: %s" % (st, raw[:500]))
    check(hs.get("x-airetry-target") == "an/m@json", "target %r" % hs.get("x-airetry-target"))
    msg = json.loads(raw)["choices"][0]["message"]
    check(msg.get("content") == INSTANCE, "content %r" % msg)


@test("Claude Code's request in front of an OpenAI upstream (primary down)")
def t_claude_code(env):
    with open(CLAUDE_CODE) as f:
        body = json.load(f)
    body["model"] = "down-oa"
    st, hs, raw = anthropic(env.port, body)
    check(st == 200, "status %d: %s" % (st, raw[:800]))
    check(hs.get("x-airetry-target") == "oa/m", "target %r" % hs.get("x-airetry-target"))
    text, _, stop, _ = anthropic_stream(raw)
    check(text.startswith("[m]") and stop == "end_turn", "text %r %r" % (text, stop))


def main():
    env = []

    def setup(binary):
        env.append(Env(binary))
        return lambda fn: fn(env[0])
    return airtest.main(TESTS, setup,
                        finish=lambda: check(env[0].gw.poll() is None, "the gateway died"))


if __name__ == "__main__":
    sys.exit(main())
