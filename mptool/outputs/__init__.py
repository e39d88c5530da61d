"""Every file mptool writes: result CSV/JSON with the manifest (``results``), the HTML/Markdown report."""
