"""jinja2 templates of the deployment artifacts (rendered by rbl.backends). This directory ships
inside the package as rbl.templates; see pyproject.toml."""
