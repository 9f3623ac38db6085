"""millimcp.server.uri_template: matching URIs against RFC 6570 templates."""

from __future__ import annotations

import pytest

from millimcp.server.uri_template import UriTemplate


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        ("test://template/{id}/data", "test://template/42/data", {"id": "42"}),
        ("test://template/{id}/data", "test://template/a-b_c.d~e/data", {"id": "a-b_c.d~e"}),
        ("db://{schema}/{table}", "db://public/users", {"schema": "public", "table": "users"}),
        ("m://{a,b}", "m://1,2", {"a": "1", "b": "2"}),
        ("static://no-variables", "static://no-variables", {}),
    ],
)
def test_simple_expansion(template: str, uri: str, expected: dict[str, str]) -> None:
    assert UriTemplate(template).match(uri) == expected


def test_the_template_lists_its_variables() -> None:
    template = UriTemplate("db://{schema}/{table}{?limit,offset}")
    assert template.variables == ["schema", "table", "limit", "offset"]
    assert "db://" in repr(template)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:///etc/hosts", {"path": "etc/hosts"}),
        ("file:///a/b/c.txt", {"path": "a/b/c.txt"}),
        ("file:///with%20space/x", {"path": "with space/x"}),
        ("file:///q?x=1#frag", {"path": "q?x=1#frag"}),
    ],
)
def test_reserved_expansion_spans_slashes(uri: str, expected: dict[str, str]) -> None:
    assert UriTemplate("file:///{+path}").match(uri) == expected


def test_reserved_expansion_followed_by_a_literal() -> None:
    assert UriTemplate("repo://{+path}/README").match("repo://a/b/README") == {"path": "a/b"}


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("search?q=cats&lang=en", {"q": "cats", "lang": "en"}),
        ("search?lang=fr&q=x", {"lang": "fr", "q": "x"}),
        ("search?q=only", {"q": "only"}),
        ("search", {}),
        ("search?q=a%20b%26c&lang=", {"q": "a b&c", "lang": ""}),
        ("search?q=1&unknown=2", {"q": "1"}),
    ],
)
def test_query_expansion(uri: str, expected: dict[str, str]) -> None:
    assert UriTemplate("search{?q,lang}").match(uri) == expected


def test_query_continuation() -> None:
    template = UriTemplate("search{?q}{&page}")
    assert template.match("search?q=1&page=2") == {"q": "1", "page": "2"}
    assert template.match("search?q=1") == {"q": "1"}


def test_path_label_and_fragment_operators() -> None:
    assert UriTemplate("x{/segment}").match("x/abc") == {"segment": "abc"}
    assert UriTemplate("file{.ext}").match("file.json") == {"ext": "json"}
    assert UriTemplate("page{#section}").match("page#intro") == {"section": "intro"}


@pytest.mark.parametrize(
    ("encoded", "decoded"),
    [
        ("a%20b", "a b"),
        ("a%2Fb", "a/b"),
        ("%E6%97%A5%E6%9C%AC", "日本"),
        ("100%25", "100%"),
        ("a+b", "a+b"),
    ],
)
def test_simple_values_are_percent_decoded(encoded: str, decoded: str) -> None:
    assert UriTemplate("test://template/{id}/data").match(f"test://template/{encoded}/data") == {
        "id": decoded
    }


@pytest.mark.parametrize(
    "uri",
    [
        "test://template//data",  # empty value
        "test://template/a/b/data",  # a slash is not part of a simple value
        "test://template/42/data/extra",  # trailing text
        "prefix-test://template/42/data",  # leading text
        "test://template/42",  # the literal suffix is missing
        "other://template/42/data",  # another scheme
        "test://template/a?b/data",
        "test://template/a#b/data",
        "TEST://TEMPLATE/42/DATA",
    ],
)
def test_non_matches(uri: str) -> None:
    assert UriTemplate("test://template/{id}/data").match(uri) is None


def test_literal_regex_characters_are_escaped() -> None:
    template = UriTemplate("weird://a.b+c(d)/{x}")
    assert template.match("weird://a.b+c(d)/1") == {"x": "1"}
    assert template.match("weird://aXb+c(d)/1") is None


def test_bad_variable_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="bad variable name"):
        UriTemplate("x://{a,}")


def test_a_variable_may_appear_twice() -> None:
    template = UriTemplate("mirror://{id}/copy/{id}")
    assert template.match("mirror://7/copy/7") == {"id": "7"}


def test_distinct_variables_with_similar_names() -> None:
    template = UriTemplate("x://{a_b}/{a.b}")
    assert template.match("x://1/2") == {"a_b": "1", "a.b": "2"}
