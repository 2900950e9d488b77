"""Iterative profile search (HHblits-style): :class:`Searcher` searches a ``trackfold db build`` database with
:class:`Settings` (:data:`PRESETS`: ``default``, ``fast``, ``sensitive``, ``context``) and returns :class:`Hits`
or iterative MSAs."""

from workflow_lib.search.hits import Hits
from workflow_lib.search.searcher import Searcher
from workflow_lib.search.settings import DEFAULT, FAST, PRESETS, MsaSettings, SearchSettings, Settings

__all__ = ["DEFAULT", "FAST", "PRESETS", "Hits", "MsaSettings", "SearchSettings", "Searcher", "Settings"]
