"""jinja2 templates of the deployment artifacts (rendered by rbl.targets). This directory ships
inside the package as rbl.templates; see pyproject.toml."""
