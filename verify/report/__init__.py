"""Reports of a run: ``report.json`` and the folder (``write``), the HTML page
(``html``, Jinja2 templates in ``templates/``) and JUnit XML (``junit``)."""
