"""A small CEL evaluator covering the expressions used by the vendored CRDs' x-kubernetes-validations and by the
MutatingAdmissionPolicies kubesim honours (kubesim.apiserver.admission_policies).

Supported: literals (int, string, bool, null, lists, maps `{k: v}`), self / oldSelf / macro variables, field
selection, indexing, ! - && || ?:, == != < <= > >= in, has(), size(), .size(), string.matches(regex) (RE2
semantics: true when the pattern matches anywhere; the vendored patterns are anchored and use no syntax Python's re
reads differently), the all / exists / exists_one / filter / map macros, and object construction `Object{field: v}`
/ `Object.metadata{...}` (an apply configuration: it evaluates to the mapping of its fields). Anything else raises
CELError at parse time, so an unknown construct in a vendored schema or a shipped policy is caught by the tests that
parse them.
"""

from __future__ import annotations

import re
from typing import Any

Node = tuple


class CELError(Exception):
    """Parse error or runtime error (missing field, bad types)."""


_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[!<>?:.,()\[\]{}+\-]))"
)
_MACROS = {"all", "exists", "exists_one", "filter", "map"}


def _tokenize(src: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOKEN.match(src, pos)
        if not m:
            raise CELError(f"unexpected character at {pos} in {src!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    out.append(("eof", ""))
    return out


class _Parser:
    def __init__(self, src: str) -> None:
        self.toks = _tokenize(src)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i]

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.toks[self.i]
        if value is not None and tok[1] != value:
            raise CELError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.cond()
        if self.peek()[0] != "eof":
            raise CELError(f"trailing input at {self.peek()[1]!r}")
        return node

    def cond(self) -> Node:
        test = self.binary(0)
        if self.peek()[1] == "?":
            self.take("?")
            yes = self.cond()
            self.take(":")
            return ("?", test, yes, self.cond())
        return test

    _LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"))

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[1] in self._LEVELS[level] and self.peek()[0] in ("op", "id"):
            op = self.take()[1]
            left = (op, left, self.binary(level + 1))
        return left

    def unary(self) -> Node:
        if self.peek()[1] == "!":
            self.take()
            return ("!", self.unary())
        if self.peek()[1] == "-":
            self.take()
            return ("neg", self.unary())
        return self.postfix(self.primary())

    def args(self) -> list[Node]:
        self.take("(")
        out = []
        while self.peek()[1] != ")":
            out.append(self.cond())
            if self.peek()[1] == ",":
                self.take(",")
        self.take(")")
        return out

    def postfix(self, node: Node) -> Node:
        while True:
            tok = self.peek()[1]
            if tok == ".":
                self.take()
                name = self.take()[1]
                if self.peek()[1] == "(":
                    args = self.args()
                    if name in _MACROS:
                        if len(args) != 2 or args[0][0] != "ident":
                            raise CELError(f"bad macro {name}")
                        node = ("macro", name, node, args[0][1], args[1])
                    elif name == "size" and not args:
                        node = ("size", node)
                    elif name == "matches" and len(args) == 1:
                        node = ("matches", node, args[0])
                    else:
                        raise CELError(f"unsupported method {name}")
                else:
                    node = ("sel", node, name)
            elif tok == "[":
                self.take()
                idx = self.cond()
                self.take("]")
                node = ("index", node, idx)
            elif tok == "{" and _type_name(node):
                node = ("object", self.fields())
            else:
                return node

    def fields(self) -> list[tuple[str, Node]]:
        """`{name: value, ...}` of an object construction."""
        self.take("{")
        out = []
        while self.peek()[1] != "}":
            kind, name = self.take()
            if kind != "id":
                raise CELError(f"expected a field name, got {name!r}")
            self.take(":")
            out.append((name, self.cond()))
            if self.peek()[1] == ",":
                self.take(",")
        self.take("}")
        return out

    def entries(self) -> list[tuple[Node, Node]]:
        """`{key: value, ...}` of a map literal (its `{` taken)."""
        out = []
        while self.peek()[1] != "}":
            key = self.cond()
            self.take(":")
            out.append((key, self.cond()))
            if self.peek()[1] == ",":
                self.take(",")
        self.take("}")
        return out

    def primary(self) -> Node:
        kind, val = self.take()
        if kind == "num":
            return ("lit", int(val))
        if kind == "str":
            return ("lit", bytes(val[1:-1], "utf-8").decode("unicode_escape"))
        if kind == "id":
            if val in ("true", "false"):
                return ("lit", val == "true")
            if val == "null":
                return ("lit", None)
            if self.peek()[1] == "(":
                args = self.args()
                if val == "has":
                    if len(args) != 1 or args[0][0] != "sel":
                        raise CELError("has() needs a field selection")
                    return ("has", args[0][1], args[0][2])
                if val == "size" and len(args) == 1:
                    return ("size", args[0])
                raise CELError(f"unsupported function {val}")
            return ("ident", val)
        if val == "(":
            node = self.cond()
            self.take(")")
            return node
        if val == "[":
            items = []
            while self.peek()[1] != "]":
                items.append(self.cond())
                if self.peek()[1] == ",":
                    self.take(",")
            self.take("]")
            return ("list", items)
        if val == "{":
            return ("map", self.entries())
        raise CELError(f"unexpected token {val!r}")


def _type_name(node: Node) -> bool:
    """Whether a node names a type that can be constructed: `Object`, `Object.spec.template`..."""
    while node[0] == "sel":
        node = node[1]
    return node == ("ident", "Object")


def compile_rule(src: str) -> Node:
    return _Parser(src).parse()


def uses_old_self(node: Any) -> bool:
    if isinstance(node, tuple):
        if node[:2] == ("ident", "oldSelf"):
            return True
        return any(uses_old_self(n) for n in node[1:])
    if isinstance(node, list):
        return any(uses_old_self(n) for n in node)
    return False


def evaluate(node: Node, env: dict[str, Any]) -> Any:
    op = node[0]
    if op == "lit":
        return node[1]
    if op == "ident":
        if node[1] not in env:
            raise CELError(f"undeclared reference to {node[1]!r}")
        return env[node[1]]
    if op == "sel":
        obj = evaluate(node[1], env)
        if not isinstance(obj, dict) or node[2] not in obj:
            raise CELError(f"no such key: {node[2]}")
        return obj[node[2]]
    if op == "has":
        obj = evaluate(node[1], env)
        return isinstance(obj, dict) and node[2] in obj
    if op == "index":
        obj, idx = evaluate(node[1], env), evaluate(node[2], env)
        try:
            return obj[idx]
        except (KeyError, IndexError, TypeError) as exc:
            raise CELError(f"no such key: {idx}") from exc
    if op == "size":
        val = evaluate(node[1], env)
        if not isinstance(val, list | dict | str):
            raise CELError("size() of a non-collection")
        return len(val)
    if op == "matches":
        text, pattern = evaluate(node[1], env), evaluate(node[2], env)
        if not isinstance(text, str) or not isinstance(pattern, str):
            raise CELError("no matching overload for matches")
        return re.search(pattern, text) is not None
    if op == "list":
        return [evaluate(n, env) for n in node[1]]
    if op == "map":
        return {evaluate(key, env): evaluate(value, env) for key, value in node[1]}
    if op == "object":
        return {name: evaluate(value, env) for name, value in node[1]}
    if op == "!":
        return not _bool(evaluate(node[1], env))
    if op == "neg":
        return -evaluate(node[1], env)
    if op == "?":
        return evaluate(node[2] if _bool(evaluate(node[1], env)) else node[3], env)
    if op == "&&":
        return _bool(evaluate(node[1], env)) and _bool(evaluate(node[2], env))
    if op == "||":
        return _bool(evaluate(node[1], env)) or _bool(evaluate(node[2], env))
    if op == "macro":
        return _macro(node, env)
    left, right = evaluate(node[1], env), evaluate(node[2], env)
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if op == "in":
        return left in right
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    try:
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    except TypeError as exc:
        raise CELError(f"no matching overload for {op}") from exc


def _bool(val: Any) -> bool:
    if not isinstance(val, bool):
        raise CELError("no matching overload: expected bool")
    return val


def _macro(node: Node, env: dict[str, Any]) -> Any:
    _, name, target, var, body = node
    coll = evaluate(target, env)
    if isinstance(coll, dict):
        coll = list(coll)
    if not isinstance(coll, list):
        raise CELError(f"{name}() on a non-list")
    results = [evaluate(body, {**env, var: item}) for item in coll]
    if name == "all":
        return all(_bool(r) for r in results)
    if name == "exists":
        return any(_bool(r) for r in results)
    if name == "exists_one":
        return sum(1 for r in results if _bool(r)) == 1
    if name == "filter":
        return [item for item, r in zip(coll, results, strict=True) if _bool(r)]
    return results
