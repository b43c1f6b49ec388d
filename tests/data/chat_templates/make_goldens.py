#!/usr/bin/env python3
"""Records what transformers' apply_chat_template renders, for tests/tokenizer/test_chat_template*.cpp.

Run from this directory (see README.md for the exact command and versions):
    python make_goldens.py > goldens.json

Two kinds of cases:
- "chats": real tokenizer_config.json templates (the subdirectories here), rendered through
  AutoTokenizer.apply_chat_template(tokenize=False) with the tokenizer's own special tokens;
- "features": small templates written for this suite, rendered by the same code path
  (transformers' render_jinja_template, i.e. its sandboxed jinja2 environment), to pin down
  interpreter details the real templates only touch now and then.
A case that raises records "error" (the exception type and message) instead of "expected".
Never regenerate this file from shardlm's own output.
"""

import datetime as _datetime
import json
import os
import sys

import jinja2
import tokenizers
import transformers
from transformers import AutoTokenizer
from transformers.utils import chat_template_utils

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_TOKENIZERS = os.environ.get("SHARDLM_SHARED_TOKENIZERS", "/work/shared/tokenizers")

# strftime_now() reads datetime.now(); pin it so the goldens do not depend on the day.
FIXED_NOW = _datetime.datetime(2026, 1, 15, 9, 5, 7)


class _FixedDatetime(_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


chat_template_utils.datetime = _FixedDatetime
chat_template_utils._compile_jinja_template.cache_clear()

TEMPLATES = ["qwen3", "llama3", "llama3_1", "gemma3", "deepseek_v3"]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time; returns \"HH:MM\"",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": []},
    },
}

UNICODE_TEXT = "Grüße aus Zürich 👋🏽 — 你好，世界！ مرحبا  ¿Qué tal? नमस्ते\tend"

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one?"},
    ],
    "ends_with_assistant": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road?"},
    ],
    "unicode_and_whitespace": [
        {"role": "system", "content": "  padded system prompt \n"},
        {"role": "user", "content": "\n " + UNICODE_TEXT + " \n\n"},
        {"role": "assistant", "content": " 答案是：42。\u3000"},
        {"role": "user", "content": "Line one\nLine two\r\n\tindented {{ not jinja }} {% neither %}"},
    ],
    "special_characters": [
        {"role": "user", "content": "Quotes ' \" and backslash \\ and <|im_end|> and </think>?"},
    ],
    "empty_content": [
        {"role": "user", "content": ""},
    ],
}

QWEN3_CONVERSATIONS = {
    "think_in_content": [
        {"role": "user", "content": "What is 7*6?"},
        {"role": "assistant", "content": "<think>\n7 times 6 is 42.\n</think>\n\nThe answer is 42."},
        {"role": "user", "content": "And 6*7?"},
    ],
    "think_in_last_assistant": [
        {"role": "user", "content": "What is 7*6?"},
        {"role": "assistant", "content": "<think>\nEasy.\n</think>\n\n42"},
    ],
    "reasoning_content": [
        {"role": "user", "content": "Solve x+1=3."},
        {"role": "assistant", "content": "x = 2", "reasoning_content": "Subtract 1 from both sides."},
    ],
    "reasoning_content_then_user": [
        {"role": "user", "content": "Solve x+1=3."},
        {"role": "assistant", "content": "x = 2", "reasoning_content": "\nSubtract 1.\n"},
        {"role": "user", "content": "Thanks!"},
    ],
    "tool_calls": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris and the time?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}},
                {"type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"Europe/Paris\"}"}},
            ],
        },
        {"role": "tool", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
        {"role": "tool", "content": "14:05"},
        {"role": "assistant", "content": "It is 21.5 °C and clear in Paris; the time is 14:05."},
        {"role": "user", "content": "<tool_response>\nfake\n</tool_response>"},
    ],
    "tool_call_with_content_and_null": [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "reasoning_content": None,
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
        },
        {"role": "tool", "content": "cold"},
    ],
    "system_not_first": [
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": "Late system message."},
        {"role": "user", "content": "Hello again"},
    ],
}

GEMMA3_CONVERSATIONS = {
    "content_parts": [
        {"role": "system", "content": [{"type": "text", "text": "You describe images."}]},
        {"role": "user", "content": [{"type": "image", "url": "cat.png"}, {"type": "text", "text": "  What is this?  "}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
        {"role": "user", "content": "Thanks"},
    ],
    "roles_do_not_alternate": [
        {"role": "user", "content": "One"},
        {"role": "user", "content": "Two"},
    ],
}

DEEPSEEK_CONVERSATIONS = {
    "tool_outputs": [
        {"role": "system", "content": "Sys A"},
        {"role": "system", "content": "Sys B"},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Calling tools."},
        {"role": "tool", "content": "sunny"},
        {"role": "tool", "content": "22C"},
        {"role": "assistant", "content": "Sunny, 22C."},
    ],
    "ends_with_tool": [
        {"role": "user", "content": "Weather?"},
        {"role": "tool", "content": "sunny"},
    ],
    "tool_calls_without_content": [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}],
        },
    ],
}


def outcome(render):
    try:
        return {"expected": render()}
    except Exception as exc:  # recorded: the C++ side must fail too
        return {"error": f"{type(exc).__name__}: {exc}"}


def chat_cases():
    cases = []
    for name in TEMPLATES:
        # The tokenizer.json files live outside the repository; their tokenizer_config.json
        # files are the ones copied here.
        tokenizer = AutoTokenizer.from_pretrained(os.path.join(SHARED_TOKENIZERS, name))
        with open(os.path.join(HERE, name, "tokenizer_config.json"), encoding="utf-8") as f:
            assert tokenizer.chat_template == json.load(f)["chat_template"], name
        special = {k: v for k, v in tokenizer.special_tokens_map.items()}
        conversations = dict(CONVERSATIONS)
        if name == "qwen3":
            conversations.update(QWEN3_CONVERSATIONS)
        if name == "gemma3":
            conversations.update(GEMMA3_CONVERSATIONS)
        if name == "deepseek_v3":
            conversations.update(DEEPSEEK_CONVERSATIONS)
        variants = [dict()]
        if name == "qwen3":
            variants = [dict(), {"enable_thinking": True}, {"enable_thinking": False}]
        tool_sets = [None]
        if name in ("qwen3", "llama3_1"):
            tool_sets = [None, [WEATHER_TOOL, TIME_TOOL]]
        for conversation_name, messages in conversations.items():
            for add_generation_prompt in (False, True):
                for extra in variants:
                    for tools in tool_sets:
                        case = {
                            "name": f"{name}/{conversation_name}/agp={int(add_generation_prompt)}"
                            + "".join(f"/{k}={v}" for k, v in extra.items())
                            + ("/tools" if tools else ""),
                            "template": name,
                            "messages": messages,
                            "add_generation_prompt": add_generation_prompt,
                            "tools": tools,
                            "documents": None,
                            "extra_variables": extra,
                            "special_tokens": special,
                        }
                        case.update(outcome(lambda: tokenizer.apply_chat_template(
                            messages, tools=tools, add_generation_prompt=add_generation_prompt,
                            tokenize=False, **extra)))
                        cases.append(case)
        # continue_final_message: the render stops inside the final (assistant) message.
        continuations = [("content", PARTIAL_ANSWER, False), ("content", PARTIAL_ANSWER, True)]
        if name == "qwen3":
            continuations.append(("reasoning_content", PARTIAL_REASONING, False))
        if name == "gemma3":
            continuations.append(("content", PARTIAL_PARTS, False))
        for field, messages, add_generation_prompt in continuations:
            case = {
                "name": f"{name}/continue_final_message={field}/agp={int(add_generation_prompt)}"
                + ("/parts" if messages is PARTIAL_PARTS else ""),
                "template": name,
                "messages": messages,
                "add_generation_prompt": add_generation_prompt,
                "continue_final_message": field,
                "tools": None,
                "documents": None,
                "extra_variables": {},
                "special_tokens": special,
            }
            case.update(outcome(lambda: tokenizer.apply_chat_template(
                messages, add_generation_prompt=add_generation_prompt, tokenize=False,
                continue_final_message=True if field == "content" else field)))
            cases.append(case)
    return cases


PARTIAL_ANSWER = [
    {"role": "user", "content": "Write a haiku about rain."},
    {"role": "assistant", "content": "Soft rain on the roof,  "},
]
PARTIAL_REASONING = [
    {"role": "user", "content": "What is 12*12?"},
    {"role": "assistant", "content": "", "reasoning_content": "12 times 12 is"},
]
PARTIAL_PARTS = [
    {"role": "user", "content": [{"type": "text", "text": "Describe it."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "It is a"}]},
]


# (name, template source, variables). Each renders with messages=[{"role": "user", "content": "hi"}].
FEATURES = [
    ("literals", "{{ 1 }}|{{ -2 }}|{{ 1.5 }}|{{ 'a' 'b' }}|{{ \"q\" }}|{{ true }}|{{ False }}|{{ none }}|{{ None }}", {}),
    ("float_repr", "{{ 1/2 }} {{ 4/2 }} {{ 0.1+0.2 }} {{ 1e-5 }} {{ 1e16 }} {{ 1.5e15 }} {{ 123456789.0 }} {{ -0.0 }} {{ 2.5e-3 }} {{ 1e100 }}", {}),
    ("arithmetic", "{{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 }} {{ 2**-1 }} {{ 3*'ab' }} {{ [1]*3 }} {{ 1+True }} {{ 7.5//2 }} {{ -7.5 % 2 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ not true or true }} {{ 'a' ~ 1 * 2 }} {{ (1 + 2) ~ 'x' }}", {}),
    ("comparison", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ [1,2] == [1,2] }} {{ 'abc' < 'abd' }} {{ 2 >= 2 }} {{ (1,2) < (1,3) }}", {}),
    ("in_operator", "{{ 'a' in 'cat' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'cat' }} {{ 3 not in [1] }} {{ 'x' in undefined_thing }}", {}),
    ("logic_values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or [] }} {{ not '' }}", {}),
    ("ternary", "{{ 'y' if true else 'n' }}{{ 'y' if false else 'n' }}[{{ 'y' if false }}]{{ 'a' if 0 else 'b' if 1 else 'c' }}", {}),
    ("reprs", "{{ [1, 'a', none, true, 1.5, {'k': (1, 2)}, (3,), ()] }} {{ {'a': [], 'b': {}} }} {{ [\"it's\", 'a\"b', 'x\\ny', '\\t\\\\'] }}", {}),
    ("repr_unicode", "{{ ['é', '\\x01', '\\u200b', '\\xa0', '😀', '\\x7f'] }}", {}),
    ("string_escapes", "{{ 'tab\\there' }}|{{ \"nl\\nx\" }}|{{ '\\u00e9\\x41' }}|{{ 'back\\\\slash' }}|{{ 'unknown \\d' }}", {}),
    ("subscripts", "{{ [1,2,3][0] }} {{ [1,2,3][-1] }} {{ 'héllo'[1] }} {{ {'a': 1}['a'] }} {{ d.k }} {{ d['k'] }} {{ l.1 }}", {"d": {"k": "v"}, "l": [5, 6]}),
    ("slices", "{{ [1,2,3,4,5][1:3] }} {{ [1,2,3,4,5][::-1] }} {{ 'héllo'[::-1] }} {{ [1,2,3,4,5][::2] }} {{ [1,2,3,4,5][-2:] }} {{ [1,2,3,4,5][:-2] }} {{ [1,2,3][5:] }} {{ 'abc'[1:] }} {{ [1,2,3,4,5][4:1:-2] }}", {}),
    ("concat_binds_tighter_than_plus", "{{ 1 ~ 2 + 3 }}", {}),
    ("undefined_prints_empty", "[{{ nothing }}][{{ d.missing }}][{{ nothing is defined }}][{{ d.missing is undefined }}][{{ nothing | length }}][{{ nothing ~ 'x' }}]", {"d": {}}),
    ("undefined_attribute_error", "{{ nothing.attr }}", {}),
    ("undefined_arithmetic_error", "{{ nothing + 1 }}", {}),
    ("none_iteration_error", "{% for x in none %}{% endfor %}", {}),
    ("string_concat_error", "{{ 'a' + 1 }}", {}),
    ("for_loop_vars", "{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o','e') }};{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}{{ x }}{% else %}empty{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x % 3 == 0 %}{{ x }}{{ loop.index }}{{ loop.length }},{% endfor %}", {}),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }}{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
    ("for_string", "{% for c in 'héllo' %}[{{ c }}]{% endfor %}", {}),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("nested_loops", "{% for a in [1,2] %}{% for b in [3,4] %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("set_scoping", "{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = x + i %}{{ x }};{% endfor %}{{ x }}{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    ("namespace", "{% set ns = namespace(count=0, items=[]) %}{% for i in range(4) %}{% set ns.count = ns.count + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.count }} {{ ns.items }} {{ ns.missing is defined }}", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", {}),
    ("set_block", "{% set block %}Hello {{ name }}!\n{% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}", {"name": "Ann"}),
    ("macros", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bo') }} {{ greet('Al', '?') }} {{ greet(punct='.', name='Cy') }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_sees_globals", "{% set top = 'T' %}{% macro m() %}{{ top }}{{ bos_token }}{% endmacro %}{{ m() }}", {"bos_token": "<s>"}),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}", {}),
    ("filter_block", "{% filter upper %}shout {{ 'this' }}{% endfilter %}", {}),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("unknown_filter_not_reached", "{% if false %}{{ x | no_such_filter }}{% endif %}ok", {}),
    ("unknown_filter_reached", "{% if true %}{{ 'x' | no_such_filter }}{% endif %}", {}),
    ("generator_semantics", "{{ xs | select('odd') | list }}|{% if xs | selectattr('x') %}truthy{% endif %}|{{ xs | map('string') | join(',') }}|{{ xs | select('odd') | first }}|{{ xs | reverse | list }}|{{ xs | unique | list }}|{{ xs | select('even') is sequence }}|{{ xs | select('even') is iterable }}|{{ xs | select('even') | sort }}", {"xs": [1, 2, 3]}),
    ("generator_length_error", "{{ [1, 2] | select('odd') | length }}", {}),
    ("generator_tojson_error", "{{ [1, 2] | map('string') | tojson }}", {}),
    ("generator_last_error", "{{ [1, 2] | select('odd') | last }}", {}),
    ("generator_subscript_undefined", "[{{ ([1, 2] | select('odd'))[0] }}]", {}),
    ("dict_views", "{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}|{{ d.items() | length }}|{{ d.keys() | list }}|{{ 'a' in d.keys() }}|{{ d.items() is sequence }}|{{ d.keys() | first }}", {"d": {"a": 1, "b": [2]}}),
    ("dict_view_tojson_error", "{{ d.keys() | tojson }}", {"d": {"a": 1}}),
    ("range_repr", "{{ range(3) }}|{{ range(1, 9, 3) }}|{{ range(3) | length }}|{{ range(5)[2] }}|{{ range(0) is sequence }}|{{ range(2) | tojson if false else 'skip' }}", {}),
    ("macro_sets_missing_global", "{% macro m() %}{% if ident is not defined %}{% set ident = 'dflt' %}{% endif %}{{ ident }}{% endmacro %}{{ m() }}|{{ ident is defined }}", {}),
    ("filter_in_ternary", "{% for v in [1, 'two', {'k': [3]}, none, 2.50] %}[{{ v | tojson | string if v is not string else v }}]{% endfor %}", {}),
    ("items_filter_unpack", "{% for k, v in d | items %}{{ k }}:{{ v }};{% endfor %}{% for k, v in d | dictsort(reverse=true) %}{{ k }}{% endfor %}{% for k, v in d | dictsort(by='value') %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("split_then_last", "{{ ('x<think>y<think>z'.split('<think>') | last) }}|{{ 'a</think>\\n\\nb'.split('</think>')[-1].lstrip('\\n') }}|{{ 'a b'.split('x') }}", {}),
    ("inner_break_and_outer_slice", "{% for m in xs %}{% for n in xs[loop.index0 + 1:] %}{% if n > 3 %}{% break %}{% endif %}{{ n }}{% endfor %}{{ loop.index }};{% endfor %}", {"xs": [1, 2, 3, 4, 5]}),
    ("namespace_list_accumulate", "{% set seen = namespace(ids=[]) %}{% for id in ['a', 'b', 'a', 'c'] %}{% if id not in seen.ids %}{% set seen.ids = seen.ids + [id] %}{% endif %}{% endfor %}{{ seen.ids }}|{{ seen.ids | length }}|{{ seen }}", {}),
    ("unicode_whitespace_lstrip", "a\n\u3000\u00a0{% if true %}x{% endif %}\n\u2003 {{ 'y' }}\n\u2003{%- if true %}z{% endif %}", {}),
    ("trim_unicode_whitespace", "[{{ '\u3000\u2003 x \u00a0\u200b' | trim }}][{{ '\u0085x\u000b' | trim }}]", {}),
    ("string_repeat", "{{ '  ' * 3 }}|{{ '-' * 0 }}|{{ 2 * 'ab' }}|{{ [0] * 2 }}", {}),
    ("percent_format", "{{ '%s is %d years' % ('Ann', 3) }}|{{ '%s' % 'solo' }}|{{ '100%%' % () }}|{{ '%r' % 'q' }}|{{ '%.2f' % 3.14159 }}", {}),
    ("last_tool_call_name", "{{ msgs[-1].tool_calls[-1].function.name }}", {"msgs": [{"tool_calls": [{"function": {"name": "a"}}, {"function": {"name": "b"}}]}]}),
    ("content_parts_tests", "{% for c in ['s', [{'type': 'text', 'text': 't'}], {'k': 1}, none, 3] %}{{ c is string }}{{ c is iterable and c is not mapping }}{{ c is mapping }}{{ c is none }};{% endfor %}", {}),
    ("strftime_formats", "{{ strftime_now('%d %B %Y') }}|{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%A, %b %d %y %I:%M %p %j %H%M%S %%') }}|{{ strftime_now('%-d') }}", {}),
    ("set_loop_target_in_body", "{% for tc in [{'function': {'name': 'f'}}, {'name': 'g'}] %}{% if tc.function %}{% set tc = tc.function %}{% endif %}{{ tc.name }}{% endfor %}", {}),
    ("or_default_dict", "{% set args = none or {} %}{{ args }}{% for k, v in ({'a': 1} or {}).items() %}{{ k }}{% endfor %}", {}),
    ("comparisons_strings_lists", "{{ 'b' > 'a' }}{{ 'B' < 'a' }}{{ [1, 2] < [1, 3] }}{{ [] < [0] }}{{ 'é' > 'z' }}{{ 1 < 1.5 }}", {}),
    ("iterate_dict", "{% for k in d | sort %}{{ k }}{% endfor %}|{{ d | length }}|{{ d | list }}|{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2, "c": 3}}),
    ("chained_string_methods", "{{ '  Hello World  '.strip().lower().replace('world', 'there').split(' ') | join('_') }}", {}),
    ("tojson_in_string_building", "{{ '{\"name\": \"' + t.name + '\", \"arguments\": ' + (t.args | tojson) + '}' }}", {"t": {"name": "f", "args": {"q": "x \"y\"", "n": 1.0}}}),
    ("escape_sequences_in_source", "{{ \"a\\u2028b\" | length }}|{{ 'tab\\x09' | tojson }}|{{ '\\101\\0' | tojson }}", {}),
    ("large_ints", "{{ 2**62 }}|{{ 9007199254740993 }}|{{ 12345678901234 * 10 }}|{{ 9007199254740993 | tojson }}", {}),
    ("float_int_conversion", "{{ 10 / 4 }}|{{ 10 // 4 }}|{{ 2.0 * 3 }}|{{ 3 | float / 2 }}|{{ (7 / 2) | int }}|{{ 1e3 | int }}|{{ x }}|{{ x | tojson }}", {"x": 2.0}),
    ("loop_cycle_and_depth", "{% for i in range(4) %}{{ loop.cycle('a', 'b', 'c') }}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}", {}),
    ("nested_macro_calls_with_namespace", "{% macro inc(ns) %}{% set ns.n = ns.n + 1 %}{{ ns.n }}{% endmacro %}{% set c = namespace(n=0) %}{{ inc(c) }}{{ inc(c) }}{{ c.n }}", {}),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}", {}),
    ("for_else_after_break_or_continue", "{% for x in [1, 2] %}{% continue %}{% else %}else1{% endfor %}|{% for x in [1, 2] %}{% break %}{% else %}else2{% endfor %}|{% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}else3{% endfor %}|{% for x in [1, 2] %}{% if x == 1 %}{% continue %}{% endif %}{% else %}else4{% endfor %}", {}),
    ("set_block_scope", "{% set blk %}{% set inner = 1 %}x{% endset %}{{ inner is defined }}|{% filter upper %}{% set inner2 = 2 %}{% endfilter %}{{ inner2 is defined }}", {}),
    ("lazy_generator_errors", "{% if 'abc' | select('odd') %}truthy{% endif %}|{{ none | selectattr('x') | list }}|{{ 0 | map('upper') | list }}|{{ (1 | items) is iterable }}", {}),
    ("lazy_generator_error_consumed", "{{ 'abc' | select('odd') | list }}", {}),
    ("macro_closure", "{% for x in ['a', 'b'] %}{% macro show() %}{{ x }}{{ loop.index }}{% endmacro %}{{ show() }}{% endfor %}{% macro late() %}{{ later }}{% endmacro %}{% set later = 'L' %}{{ late() }}", {}),
    ("even_odd_floats", "{{ 4.0 is even }}{{ 3.0 is odd }}{{ 2.5 is even }}{{ 7.5 is divisibleby 2.5 }}", {}),
    ("undefined_is_callable", "{{ nothing is callable }}{{ 1 is callable }}", {}),
    ("loop_repr", "{% for x in 'ab' %}{{ loop }}{% endfor %}", {}),
    ("int_of_undefined_error", "{{ nothing | int }}", {}),
    ("in_namespace_error", "{{ 'a' in namespace(a=1) }}", {}),
    ("generator_has_no_list_methods", "{{ ([1] | select('odd')).count is defined }}|{{ range(5).count(2) }}", {}),
    ("generation_block", "A{% generation %}gen {{ 1 }}{% endgeneration %}B", {}),
    ("raw_block", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}!", {}),
    ("comments", "a{# comment #}b{#- strip -#}  c {# multi\nline #}d", {}),
    ("whitespace_control", "a  {{- 'b' -}}  c\n  {%- if true -%}\n  d  {%- endif %}  e", {}),
    ("trim_and_lstrip", "start\n  {% if true %}\n    inside\n  {% endif %}\n  {# c #}\nend\n", {}),
    ("lstrip_plus", "x\n  {%+ if true %}y{% endif %}\n", {}),
    ("trailing_newline", "line\n", {}),
    ("crlf_source", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc", {}),
    ("variable_no_trim", "{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("string_methods", "{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ 'hi  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}", {}),
    ("string_methods2", "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'héllo'.find('l') }}|{{ 'banana'.count('an') }}|{{ '-'.join(['a', 'b']) }}|{{ 'x{}y{}'.format(1, 'z') }}", {}),
    ("string_methods3", "{{ 'l1\\nl2\\r\\nl3'.splitlines() }}|{{ 'abc'.isalpha() }}{{ '12'.isdigit() }}{{ ' '.isspace() }}|{{ 'ab'.center(6, '*') }}|{{ 'prefix_x'.removeprefix('prefix_') }}|{{ 'ÀÉ'.lower() }}{{ 'straße'.upper() }}", {}),
    ("dict_methods", "{{ d.items() | list }}|{{ d.keys() | list }}|{{ d.values() | list }}|{{ d.get('a') }}|{{ d.get('zz', 'dflt') }}|{{ d.get('zz') }}", {"d": {"b": 1, "a": [2]}}),
    ("dict_key_vs_method", "{{ d.items is defined }}|{{ d['items'] }}|{{ d.role }}", {"d": {"items": "the key", "role": "user"}}),
    ("filters_strings", "{{ '  hi  ' | trim }}|{{ 'xhix' | trim('x') }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello wORLD-foo (bar' | title }}|{{ 'hELLO' | capitalize }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'a<b>&\"\\'' | escape }}|{{ 'one two  three' | wordcount }}|{{ 'ab' | center(6) }}", {}),
    ("filters_lists", "{{ [3,1,2] | sort }}|{{ [3,1,2] | sort(reverse=true) }}|{{ ['b','A','c'] | sort }}|{{ ['b','A','c'] | sort(case_sensitive=true) }}|{{ [1,2,3] | reverse | list }}|{{ 'abc' | reverse }}|{{ [1,2,3] | first }}|{{ [1,2,3] | last }}|{{ [1,2] | length }}|{{ 'héllo' | count }}|{{ [1,2,3] | sum }}|{{ [1,5,2] | max }}|{{ [4,1,2] | min }}|{{ [1,2,1,3] | unique | list }}", {}),
    ("filters_join_map", "{{ [1,2,3] | join(', ') }}|{{ users | map(attribute='name') | join('/') }}|{{ ['a','b'] | map('upper') | list }}|{{ users | map(attribute='age', default=0) | list }}|{{ users | join(',', attribute='name') }}|{{ users | selectattr('age') | sum(attribute='age') }}", {"users": [{"name": "ann", "age": 3}, {"name": "bob"}]}),
    ("filters_select", "{{ [1,2,3,4] | select('even') | list }}|{{ [1,2,3,4] | reject('odd') | list }}|{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}|{{ msgs | rejectattr('role', '==', 'user') | list | length }}|{{ [0, 1, '', 'a'] | select | list }}|{{ msgs | selectattr('tool') | list | length }}", {"msgs": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "tool": 1}, {"role": "user", "content": "c"}]}),
    ("filters_numbers", "{{ '42' | int }}|{{ '4.7' | int }}|{{ 'x' | int }}|{{ 'x' | int(7) }}|{{ 3.9 | int }}|{{ '2.5' | float }}|{{ 3 | float }}|{{ -3 | abs }}|{{ 2.5 | round }}|{{ 3.5 | round }}|{{ 2.567 | round(2) }}|{{ 2.1 | round(0, 'ceil') }}|{{ 7 | round }}", {}),
    ("filters_misc", "{{ none | default('d') }}|{{ nothing | default('d') }}|{{ '' | default('d', true) }}|{{ nothing | d('x') }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ {'b': 1, 'a': 2} | items | list }}|{{ 'ab' | list }}|{{ 5 | string }}|{{ [1,2,3,4,5] | batch(2) | list }}|{{ [1,2,3] | batch(2, 'x') | list }}|{{ {'k': 1} | attr('k') }}|{{ '%s-%d' | format('a', 3) }}|{{ '<b>' | safe }}", {}),
    ("filter_indent", "[{{ 'a\\nb\\n\\nc' | indent }}][{{ 'a\\nb' | indent(2, true) }}][{{ 'a\\n\\nb' | indent(width='> ', blank=true) }}]", {}),
    ("tojson_basic", "{{ d | tojson }}|{{ 'é\"\\n\\t<>&' | tojson }}|{{ [1, 2.0, none, true, 'x'] | tojson }}|{{ 3 | tojson }}|{{ {} | tojson }}|{{ [] | tojson }}|{{ (1, 2) | tojson }}", {"d": {"z": 1, "a": {"nested": [1, {"k": None}]}, "é": "ü"}}),
    ("tojson_args", "{{ d | tojson(indent=2) }}|{{ d | tojson(indent=2, separators=(', ', ' = ')) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(ensure_ascii=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ d | tojson(indent='\\t') }}|{{ d | tojson(indent=0) }}", {"d": {"z": [1, {}], "a": "é😀", "e": []}}),
    ("tojson_numbers", "{{ [1.0, 0.1, 1e20, 1e-7, 12345678901234567890.0, -2.5] | tojson }}", {}),
    ("tests", "{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is integer }}{{ true is boolean }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is sequence }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ none is none }}{{ x is callable }}{{ range is callable }}", {"x": 1}),
    ("tests2", "{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 'a' is in 'cat' }}{{ 2 is in [1,2] }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 2 is gt 1 }}{{ 2 is lessthan 1 }}{{ 1 is ne 2 }}{{ x is sameas none }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ 1 is not none }}", {"x": None}),
    ("tests_undefined", "{{ nothing is iterable }}{{ nothing is sequence }}{{ nothing is string }}{{ nothing is none }}{{ nothing is not defined }}", {}),
    ("globals", "{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(5, 0, -2) | list }}|{{ dict(a=1, b='x') }}|{{ dict([('k', 1)]) }}|{{ namespace(a=1).a }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %d %B %A') }}", {}),
    ("raise_exception", "before{{ raise_exception('Only user and assistant roles are supported!') }}", {}),
    ("messages_passthrough", "{{ messages[0].role }}:{{ messages[0]['content'] }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|{{ tools is none }}", {}),
    ("list_methods", "{{ [1,2,3].index(2) }}{{ [1,1,2].count(1) }}", {}),
    ("list_append_blocked", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("dict_literal_order", "{{ {'z': 1, 'a': 2, 'm': 3} }}|{{ {'z': 1, 'a': 2} | tojson }}", {}),
    ("concat_and_tilde", "{{ 'a' ~ none ~ true ~ 1.0 ~ [1] }}|{{ [1] + [2] }}|{{ (1,) + (2,) }}", {}),
    ("nested_data_access", "{% for m in msgs %}{{ m.role }}:{% for c in m.content %}{{ c.type }}={{ c.text | default('-') }},{% endfor %};{% endfor %}", {"msgs": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image"}]}]}),
    ("loop_in_macro_scope", "{% macro items(xs) %}{% for x in xs %}{{ loop.index }}{{ x }}{% endfor %}{% endmacro %}{% for y in [1] %}{{ items(['a', 'b']) }}{{ loop.index }}{% endfor %}", {}),
    ("unicode_text", "{{ s }}|{{ s | length }}|{{ s[0] }}{{ s[-1] }}|{{ s | upper }}|{{ s | tojson }}", {"s": "ça 日本 👍🏽"}),
]

# Templates that must not parse (jinja2 raises TemplateSyntaxError or TemplateAssertionError).
MALFORMED = [
    ("unclosed_for", "{% for x in y %}no end"),
    ("unclosed_if", "{% if x %}a{% else %}b"),
    ("unclosed_variable", "{{ x "),
    ("unclosed_comment", "{# never closed"),
    ("unknown_filter", "{{ x | no_such_filter }}"),
    ("unknown_test", "{{ x is no_such_test }}"),
    ("unknown_filter_in_loop", "{% for x in y %}{{ x | no_such_filter }}{% endfor %}"),
    ("unknown_tag", "{% frobnicate %}"),
    ("stray_endif", "{% endif %}"),
    ("bad_expression", "{{ 1 + }}"),
    ("unbalanced_paren", "{{ (1 + 2 }}"),
    ("stray_close_bracket", "{{ 1 ] }}"),
    ("mismatched_end", "{% for x in y %}{% endif %}"),
    ("elif_after_else", "{% if a %}{% else %}{% elif b %}{% endif %}"),
    ("unterminated_string", "{{ 'abc }}"),
]


# (name, template source, variables, apply_chat_template arguments): features that need
# tools, documents or add_generation_prompt.
FEATURES_WITH_OPTIONS = [
    ("documents", "{% for d in documents %}{{ loop.index0 }}: {{ d.title }} - {{ d.text }}{% for k, v in d.items() %}[{{ k }}]{% endfor %}\n{% endfor %}{{ documents | tojson }}",
     {}, {"documents": [{"title": "A", "text": "alpha"}, {"title": "B ü", "text": "beta", "url": "http://x"}]}),
    ("tools_and_generation_prompt", "{{ tools | map(attribute='function') | map(attribute='name') | join(',') }}|{{ add_generation_prompt }}|{{ tools[0] | tojson(indent=4) }}",
     {}, {"tools": [WEATHER_TOOL, TIME_TOOL], "add_generation_prompt": True}),
]


def feature_cases():
    messages = [{"role": "user", "content": "hi"}]
    cases = []
    for name, source, variables, *options in FEATURES + FEATURES_WITH_OPTIONS:
        options = options[0] if options else {}
        case = {"name": name, "source": source, "variables": variables, "options": options}
        case.update(outcome(lambda: chat_template_utils.render_jinja_template(
            conversations=[messages], chat_template=source, **options, **variables)[0][0]))
        cases.append(case)
    malformed = []
    for name, source in MALFORMED:
        try:
            chat_template_utils._compile_jinja_template(source)
            raise SystemExit(f"malformed case {name} compiled in jinja2")
        except jinja2.exceptions.TemplateError as exc:
            malformed.append({"name": name, "source": source, "error": f"{type(exc).__name__}: {exc}"})
    return cases, malformed


def main():
    features, malformed = feature_cases()
    goldens = {
        "generated_by": {
            "command": "python make_goldens.py > goldens.json",
            "python": sys.version.split()[0],
            "transformers": transformers.__version__,
            "jinja2": jinja2.__version__,
            "tokenizers": tokenizers.__version__,
            "strftime_now_fixed_at": FIXED_NOW.isoformat(),
        },
        "chats": chat_cases(),
        "features": features,
        "malformed": malformed,
    }
    json.dump(goldens, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
