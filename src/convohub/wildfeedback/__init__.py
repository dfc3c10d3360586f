"""WildFeedback (issue 6, data half): feedback identification, preference summaries, preference pairs,
the user-split clustered test set, and the dataset release. See :mod:`convohub.wildfeedback.pipeline`."""

from convohub.wildfeedback.identify import IdentificationError, identify
from convohub.wildfeedback.labels import FeedbackResult, TurnLabel
from convohub.wildfeedback.preferences import PreferenceError, summarise

__all__ = ["FeedbackResult", "IdentificationError", "PreferenceError", "TurnLabel", "identify", "summarise"]
