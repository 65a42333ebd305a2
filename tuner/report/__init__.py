"""Everything a person reads: live views, tables, charts and the HTML report."""
