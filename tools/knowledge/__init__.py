"""lookup_knowledge over a folder of markdown runbooks (docs/architecture.md, "Runbook search").

- `folder`: which files are runbooks, read without leaving the folder;
- `runbook`: one runbook's title, front matter, headings and text;
- `terms`: the words BM25 compares (alert names split, English stemmed, CJK bigrams);
- `glossary`: Chinese <-> English query expansion from the bundled SRE glossary;
- `index`: BM25F over title, front matter, headings and body, updated one runbook at a time;
- `snippet`: the excerpt a search shows;
- `parts`: a runbook cut into parts that each fit one observation;
- `adapter`: the tool itself.
"""

from tools.knowledge.adapter import KnowledgeAdapter
from tools.knowledge.folder import SkippedFile, bundled_knowledge_path

__all__ = ["KnowledgeAdapter", "SkippedFile", "bundled_knowledge_path"]
