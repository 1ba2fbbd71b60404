"""The shape of the demo world: sizes, shares and the retrieval model's tuning. Changing any of
these changes what `recallwatch demo` writes and the story its report tells."""

N_GOLDENS = 300
N_GOLDENS_WITHOUT_EVIDENCE = 10
N_DELETED_GOLD_CHUNKS = 6
MAX_GOLD_CHUNKS = 4
# Probabilities of a golden needing 1, 2, 3 or 4 chunks.
GOLD_CHUNK_COUNT_WEIGHTS = (0.30, 0.35, 0.20, 0.15)

INITIAL_INDEX_SIZE = 100_000
DAILY_GROWTH_RANGE = (2_700, 3_300)  # chunks added per day, inclusive bounds
REBUILD_AFTER_DAYS = 20
INDEX_VERSIONS = ("idx-v1", "idx-v2")

CANDIDATES = 10  # ranked candidates logged per retrieval
SERVED_K = 5  # of which the generator is served the top k

# Retrieval model: the number of distractors that outrank a gold chunk is geometric with mean
# (base + per_1000_added * chunks added since the version's build, in thousands) x the chunk's
# own difficulty. idx-v2's better embeddings degrade at half the rate. Tuned so mean
# recall@5 reads ~0.87 on day 1, ~0.6 on day 20, ~0.87 after the rebuild, ~0.8 at day 30.
MEAN_DISTRACTORS_AT_BUILD = {0: 1.1, 1: 1.1}
MEAN_DISTRACTORS_PER_1000_ADDED = {0: 0.056, 1: 0.025}
# Per gold chunk difficulty (lognormal, mean 1): some goldens are consistently hard to find.
DIFFICULTY_SIGMA = 0.5
# Share of distractors drawn from chunks added since the version's build: fresh content is
# what crowds out the old gold chunks.
FRESH_DISTRACTOR_SHARE = 0.4

SHARE_WITH_GOLD_ID = 0.71  # of requests that ask a golden's question (~70% of all requests)
SHARE_NOVEL_QUERIES = 0.02
SHARE_AGENTIC = 0.01  # of requests on JSON Lines days
SHARE_ACME = 0.6
# A group is a single request or a session of 2-4 turns; 1 group in 8 being a session puts
# ~30% of requests in sessions.
SHARE_SESSION_GROUPS = 0.125
SESSION_GAP_SECONDS = (15, 180)
RETRIEVER = "hybrid-v2"
N_BAD_RECORDS = 5
