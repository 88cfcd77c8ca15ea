// The Jinja interpreter against jinja2 itself, configured as transformers configures it for chat
// templates (tests/text/jinja_reference.py, one Python process for every case): one construct
// per case, with the whitespace-control and loop corner cases, the text and the {% generation %}
// spans compared exactly. Then what jinja2 has and chat templates do not use, refused by line.
#include "ampt/core/errors.h"
#include "ampt/core/json_reader.h"
#include "ampt/text/jinja_template.h"
#include "support/process.h"
#include "support/python_modules.h"
#include "support/skip.h"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

using namespace ampt::text::jinja;

namespace {

const std::string kReferenceScript = AMPT_SOURCE_DIR "/tests/text/jinja_reference.py";

struct JinjaCase {
  std::string templ;
  std::string variables = "{}";  // JSON
};

const std::string kMessages = R"({"messages": [
  {"role": "system", "content": "  Be brief.\n"},
  {"role": "user", "content": "Héllo, wörld ✓ \"quoted\" <tag>"},
  {"role": "assistant", "content": "Hi!", "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {"city": "Zürich", "n": 3, "f": 2.5, "ok": true, "none": null}}}]},
  {"role": "tool", "content": "{\"temp\": 21}"},
  {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nIt is 21.", "reasoning_content": "hmm"}],
  "tools": [{"type": "function", "function": {"name": "get", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
  "x": "set", "n": 3, "f": 2.0, "e": [], "d": {"a": 1, "b": "two"}})";

const std::vector<JinjaCase> kJinjaCases = {
    {"a {{ x }} b", R"({"x": "hi"})"},
    // whitespace control, trim_blocks and lstrip_blocks
    {"  {%- if true -%}  x  {%- endif -%}  y\n"},
    {"line1\n    {% if true %}\n    inner\n    {% endif %}\nend\n"},
    {"{% if true %}  \nkept spaces{% endif %}\n"},
    {"a  {% if true %}b{% endif %}  c\n  {{ 'v' }}  \n\t{% if true %}\tt{% endif %}\n"},
    {"{%+ if true %}x{% endif +%}\ny\n  {%+ if true %}z{% endif %}"},
    {"{{- '  x  ' -}}\n  {{ 'y' }}\n{{ 'z' -}}\n\n w"},
    {"a {# c #} b\n  {# line comment #}\nc{#- x -#}  d\n{# a\nmulti-line comment #}\ne"},
    {"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\ndone"},
    {"{% for i in [1, 2] -%}\n  {{ i }}\n{%- endfor %}\ndone"},
    // loops
    {"{% for i in items %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}"
     "{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }},{% else %}empty{% endfor %}",
     R"({"items": ["a", "b", "c"]})"},
    {"{% for i in items %}x{% else %}empty{% endfor %}", R"({"items": []})"},
    {"{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }} {% endfor %}", kMessages},
    {"{% for m in messages %}{% if loop.previtem is defined %}{{ loop.previtem.role }}>{% endif %}"
     "{{ m.role }}{% if loop.nextitem is defined %}<{{ loop.nextitem.role }}{% endif %};{% endfor %}",
     kMessages},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}"
     "{{ i }}{% endfor %}|{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} "
     "{% endfor %}{{ loop.index }}{% endfor %}"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}"
     "{% for c in 'hé' %}[{{ c }}]{% endfor %}{% for x in missing %}no{% endfor %}",
     kMessages},
    // set, scopes, namespace, macros
    {"{% set a = 1 %}{% for x in [1] %}{% set a = 2 %}{{ a }}{% endfor %}{{ a }}"
     "{% if true %}{% set b = 3 %}{% endif %}{{ b }}"},
    {"{% set ns = namespace(found=false, n=0) %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}"
     "{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.n }} {{ ns.found }}"},
    {"{% set x %}inner {{ 1 }}{% endset %}[{{ x }}]"},
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} "
     "{{ greet('B', '?') }} {{ greet(name='C', punct='.') }}{% set g = 'outer' %}"
     "{% macro show() %}{{ g }}{% endmacro %}{{ show() }}"},
    // literals, operators
    {"{{ [1, 2, 3][::-1] }} {{ 'hello'[1:] }} {{ 'héllo'[1:3] }} {{ [1, 2, 3][-1] }} "
     "{{ {'a': 1, 'b': [true, none, 1.5]} }} {{ ('t', 1) }} {{ 'it\\'s' }} {{ \"a\\nb\" }} "
     "{{ ['it\\'s', \"q\"] }} {{ messages[-1]['role'] }} {{ messages[1:3] | length }} {{ 'abc'[-2:] }}"
     "{{ [1, 2, 3, 4, 5][1::2] }} {{ 'abcdef'[::-2] }}",
     kMessages},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} "
     "{{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ 1.5 + 1 }} {{ 10 / 5 }} {{ -n }} {{ n - 1 }} {{ 0.1 + 0.2 }} "
     "{{ 1e3 }} {{ 2.5 * 2 }} {{ [1] + [2] }} {{ true + 1 }}",
     kMessages},
    {"{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 'x' not in ['x'] }} {{ 'k' in {'k': 1} }} "
     "{{ 1 == 1.0 }} {{ none == none }} {{ not true }} {{ not (1 in [2]) }} {{ 'b' >= 'a' }} "
     "{{ [1, 2] == [1, 2] }} {{ x and n }} {{ e or 'empty' }} {{ 0 or none }} {{ '' and 1 }}",
     kMessages},
    {"{{ 'a' if x else 'b' }}|{{ 'c' if false }}|{{ 'd' if false else 'e' if true else 'f' }}", kMessages},
    // tests
    {"{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ none is none }} {{ 's' is string }} "
     "{{ {} is mapping }} {{ [] is sequence }} {{ 's' is sequence }} {{ 1 is number }} {{ true is number }} "
     "{{ 1.5 is float }} {{ 1 is integer }} {{ true is true }} {{ 1 is true }} {{ false is false }} "
     "{{ x is not none }} {{ 3 is odd }} {{ 4 is even }} {{ 4 is divisibleby 2 }} {{ 'a' is equalto 'a' }} "
     "{{ d is mapping }} {{ d is iterable }} {{ true is boolean }} {{ 2 is in [1, 2] }} {{ 'A' is upper }} "
     "{{ messages[2].tool_calls is defined }} {{ messages[0].tool_calls is defined }} {{ none is sameas none }}",
     kMessages},
    // filters
    {"[{{ messages[0].content | trim }}] {{ 'AbC' | lower }} {{ 'AbC' | upper }} {{ 'hello big world' | title }} "
     "{{ 'hELLO' | capitalize }} {{ messages[1].content | length }} {{ d | length }} {{ [1, 2] | count }} "
     "{{ ['a', 'b'] | join(', ') }} {{ missing | default('dflt') }} {{ '' | default('e', true) }} "
     "{{ '' | default('e') }}| {{ d | items | list }} {{ [3, 4] | first }} {{ [3, 4] | last }} {{ 'xy' | first }} "
     "{{ 'aXbX' | replace('X', '-') }} {{ 'aXbX' | replace('X', '-', 1) }} {{ '42' | int }} {{ 'x' | int }} "
     "{{ 3.9 | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ [1, 2, 1, 3] | unique | list }} "
     "{{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }} {{ 3 | string }} {{ '<a>' | e }}",
     kMessages},
    {"{{ messages | selectattr('role', 'equalto', 'assistant') | map(attribute='content') | join(' / ') }}|"
     "{{ messages | rejectattr('role', 'in', ['system', 'tool']) | map(attribute='role') | list }}|"
     "{{ messages | selectattr('tool_calls', 'defined') | list | length }}|"
     "{{ messages | selectattr('reasoning_content') | map(attribute='role') | first }}|"
     "{{ [1, none, 0, 2] | select | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} "
     "{{ ['a', 'b'] | map('upper') | join }} {{ messages | map(attribute='tool_calls.0.function.name') | select | list }}",
     kMessages},
    {"{{ tools | tojson }}\n{{ tools[0] | tojson(indent=4) }}\n{{ messages[2].tool_calls[0].function.arguments | tojson }}\n"
     "{{ messages[1] | tojson }}\n{{ [] | tojson }} {{ {} | tojson(indent=2) }} {{ 'tab\\tctl\\x01' | tojson }} "
     "{{ {'n': n, 'f': f} | tojson }} {{ [[1, [2]], {'a': []}] | tojson(indent=2) }}",
     kMessages},
    // string methods
    {"{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'a,b,,c'.split(',') }} "
     "{{ '  a  b \\n c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ '\\n\\nx\\n'.lstrip('\\n') }}| "
     "{{ 'xxhixx'.strip('x') }} {{ '  y  '.rstrip() }}| {{ 'aaa'.replace('a', 'b', 2) }} {{ 'ab'.upper() }} "
     "{{ 'AB'.lower() }} {{ 'ab cd'.title() }} {{ 'x'.capitalize() }} {{ 'hello'.find('l') }} "
     "{{ ', '.join(['a', 'b']) }} {{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }} "
     "{{ d.keys() | list }} {{ d.values() | list }} {{ ' \\u3000wide\\u3000 '.strip() }}",
     kMessages},
    // Qwen3's reasoning split
    {"{% set content = messages[4].content %}{% if '</think>' in content %}"
     "{% set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
     "{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}[{{ reasoning }}][{{ content }}]"
     "{{ messages[::-1] | map(attribute='role') | join(',') }}",
     kMessages},
    // undefined, None, numbers from JSON
    {"[{{ missing }}][{{ none }}][{{ true }}][{{ n }}][{{ f }}][{{ missing | length }}][{{ d.nothing }}]"
     "[{{ messages[9] }}][{{ messages[0]['nope'] is defined }}]",
     kMessages},
    {"{% filter upper %}abc {{ x }}{% endfilter %}", kMessages},
    // {% generation %} spans
    {"{% for m in messages %}{{ m.role }}: {% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
     "<|end|>{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}",
     kMessages},
    // errors both raise
    {"{{ raise_exception('System role not supported') }}"},
    {"{% if messages[0].role == 'system' %}{{ raise_exception('no system turn in ' ~ messages | length ~ ' messages') }}{% endif %}",
     kMessages},
};

std::vector<std::pair<std::size_t, std::size_t>> span_list(const ampt::JsonValue& spans) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (const auto& s : spans.items) {
    out.emplace_back(static_cast<std::size_t>(s.items[0].number), static_cast<std::size_t>(s.items[1].number));
  }
  return out;
}

std::string render(const std::string& source, const std::string& variables, Spans* spans = nullptr) {
  const Template t(source, "case.jinja");
  return t.render(Value::from_json(ampt::parse_json(variables)).as_dict(), spans);
}

}  // namespace

TEST_CASE("jinja: each construct renders as jinja2 renders it in transformers' environment",
          "[text][jinja][python]") {
  if (!ampt::test::python_has("transformers, jinja2")) {
    AMPT_SKIP(reference, "skipping: transformers missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
  }
  const std::string dir = ampt::test::make_temp_dir();
  std::string cases = "[";
  for (std::size_t i = 0; i < kJinjaCases.size(); ++i) {
    cases += (i > 0 ? ",\n" : "") + std::string(R"({"template": )") + to_json(Value::string(kJinjaCases[i].templ)) +
             R"(, "variables": )" + kJinjaCases[i].variables + "}";
  }
  ampt::test::write_file(dir + "/cases.json", cases + "]");
  const auto python = ampt::test::run_process({AMPT_PYTHON, kReferenceScript, dir + "/cases.json", dir + "/out.json"});
  INFO(python.err);
  REQUIRE(python.exit_code == 0);
  const auto expected = ampt::parse_json(ampt::test::read_file(dir + "/out.json"));
  REQUIRE(expected.items.size() == kJinjaCases.size());
  for (std::size_t i = 0; i < kJinjaCases.size(); ++i) {
    INFO("case " << i << ": " << kJinjaCases[i].templ);
    const auto& want = expected.items[i];
    if (const auto* error = want.find("error")) {
      INFO("jinja2: " << error->string);
      CHECK_THROWS_AS(render(kJinjaCases[i].templ, kJinjaCases[i].variables), ampt::RuntimeError);
      continue;
    }
    Spans spans;
    std::string got;
    REQUIRE_NOTHROW(got = render(kJinjaCases[i].templ, kJinjaCases[i].variables, &spans));
    CHECK(got == want.find("text")->string);
    CHECK(spans == span_list(*want.find("spans")));
  }
}

TEST_CASE("jinja: raise_exception and render errors are one line naming the template and line", "[text][jinja]") {
  try {
    render("ok\n{% if true %}\n{{ raise_exception('Conversation roles must alternate') }}\n{% endif %}", "{}");
    FAIL("no error");
  } catch (const ampt::RuntimeError& e) {
    CHECK(std::string(e.what()) == "case.jinja: line 3: the template refuses: Conversation roles must alternate");
  }
  CHECK_THROWS_WITH(render("{{ 1 + 'a' }}", "{}"),
                    "case.jinja: line 1: unsupported operand types for +: an int and a string");
  CHECK_THROWS_WITH(render("\n{{ x.y.z }}", "{}"), "case.jinja: line 2: undefined has no attribute 'y'");
}

TEST_CASE("jinja: constructs chat templates do not use are refused by line and name", "[text][jinja]") {
  const auto refused = [](const std::string& source) {
    try {
      Template(source, "chat_template.jinja");
    } catch (const ampt::RuntimeError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refused("a\n{% include 'other.jinja' %}") ==
        "chat_template.jinja: line 2: {% include %} is not supported in a chat template");
  CHECK(refused("{{ x | wordwrap }}") ==
        "chat_template.jinja: line 1: the filter 'wordwrap' is not supported in a chat template");
  CHECK(refused("\n\n{% if x is escaped %}{% endif %}") ==
        "chat_template.jinja: line 3: the test 'escaped' is not supported in a chat template");
  CHECK(refused("{% for x in y recursive %}{% endfor %}") ==
        "chat_template.jinja: line 1: recursive for loops are not supported in a chat template");
  CHECK(refused("{% if x %}never closed") ==
        "chat_template.jinja: line 1: {% if %} is never closed by {% endif %}");
  CHECK(refused("{{ x ") == "chat_template.jinja: line 1: a {{ is never closed by }}");
  CHECK(refused("{% endfor %}") == "chat_template.jinja: line 1: unexpected {% endfor %}");
  CHECK(refused("{{ 'a' @ 'b' }}") == "chat_template.jinja: line 1: unexpected character '@'");
}
