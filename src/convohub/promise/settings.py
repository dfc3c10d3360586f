"""The environment variables a ProMISe release run reads, in a module of their own: the release wiring
(:mod:`convohub.promise.system`) names them as the build step's settings at start-up, without importing the
simulation loop and the search (numpy, bm25s) that use them."""

from __future__ import annotations

#: ``CONVOHUB_PROMISE_SOURCE=DIR``: release runs read released dialogues from this folder instead of generating
SOURCE_ENV = "CONVOHUB_PROMISE_SOURCE"
#: ``CONVOHUB_PROMISE_DIALOGUES=N``: generate N dialogues instead of the profile's (smoke tests)
DIALOGUES_ENV = "CONVOHUB_PROMISE_DIALOGUES"
#: ``CONVOHUB_PROMISE_PASSAGES=FILE``: the passage collection the build, the release and the Space search
PASSAGES_ENV = "CONVOHUB_PROMISE_PASSAGES"
