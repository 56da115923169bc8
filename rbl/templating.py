"""The jinja2 environment for templates/ (shipped in the package as rbl.templates).

Undefined names are errors, and the filters are the only way a value reaches a YAML file:
`yaml` (a quoted scalar), `compose` (a quoted scalar with `$` doubled), `oneline` (for comments).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files

import jinja2

from . import __version__
from .yaml_text import comment_text, compose_quote, yaml_quote


def template_dir():
    return files("rbl.templates")


class _PackageTemplates(jinja2.BaseLoader):
    """Loads from the installed package's resources, whatever form the installation takes."""

    def get_source(self, environment, template):
        resource = template_dir().joinpath(*template.split("/"))
        if not resource.is_file():
            raise jinja2.TemplateNotFound(template)
        return resource.read_text(encoding="utf-8"), None, lambda: True


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=_PackageTemplates(), undefined=jinja2.StrictUndefined,
                             autoescape=False, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters.update(yaml=yaml_quote, compose=compose_quote, oneline=comment_text,
                       toml=json.dumps)   # a JSON string of ASCII text is a TOML basic string
    env.globals["rbl_version"] = __version__
    return env


def _number(value) -> str:
    return "-" if value is None else f"{value:.4g}"


@lru_cache(maxsize=1)
def html_environment() -> jinja2.Environment:
    """For HTML: every value is escaped."""
    env = jinja2.Environment(loader=_PackageTemplates(), undefined=jinja2.ChainableUndefined, autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["number"] = _number
    env.globals["rbl_version"] = __version__
    return env


def render_html(template: str, **context) -> str:
    return html_environment().get_template(template).render(**context)


def render(template: str, **context) -> str:
    text = environment().get_template(template).render(**context)
    return text if text.endswith("\n") else text + "\n"   # trim_blocks eats the last newline
