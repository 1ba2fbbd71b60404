"""The words of the demo world: products, branches and attributes the goldens ask about, the
novel questions no golden covers, and the unrelated notices that fill the index as distractors.
"""

PRODUCTS = (
    "everyday checking account", "premier checking account", "student account",
    "basic savings account", "high-yield savings account", "small business account",
    "joint account", "youth savings account", "classic credit card", "platinum credit card",
    "debit card", "travel card",
)
SEGMENTS = ("urban", "semi-urban", "rural", "metro")
# (attribute, kind of value)
ATTRIBUTES = (
    ("monthly fee", "fee"), ("minimum balance", "amount"), ("overdraft limit", "amount"),
    ("interest rate", "rate"), ("daily ATM withdrawal limit", "amount"),
    ("card replacement fee", "fee"), ("foreign transaction fee", "rate"),
    ("late payment fee", "fee"), ("international wire transfer fee", "fee"),
    ("opening deposit", "amount"), ("cash deposit fee", "fee"), ("paper statement fee", "fee"),
)
QUESTION_TEMPLATES = (
    "What is the {attr} for the {product} at {seg} branches?",
    "How much is the {attr} on {a_product} at {a_seg} branch?",
    "What {attr} applies to {a_product} opened at {a_seg} branch?",
    "At {seg} branches, what is the {attr} of the {product}?",
    "Can you tell me the {attr} for {a_product} held at {a_seg} branch?",
)
APP_MENUS = ("Accounts > Fees", "Cards > Limits", "Help > Pricing", "Settings > Statements",
             "Accounts > Details")
NO_ANSWER_RESPONSE = "Sorry, I could not find that in our documents."
# The novel queries share the domain but not the phrasing of any golden question.
NOVEL_QUERIES = tuple(
    f"{opening} {task}?"
    for opening in ("How do I", "Can I", "Where can I", "Is it possible to")
    for task in (
        "reset my online banking password", "open a joint account online",
        "change my registered phone number", "close an account I no longer use",
        "add a beneficiary from abroad", "get a bank reference letter",
        "freeze my card temporarily", "dispute a card transaction",
        "order a new cheque book", "switch my salary to this bank",
    )
)
# Distractor vocabulary is deliberately unlike the gold passages, so the passages route
# (string similarity) does not mistake a distractor for a gold chunk.
CITIES = ("Lakeview", "Brookfield", "Hillcrest", "Riverside", "Oakmont", "Pinegate",
          "Maple Ridge", "Stonebridge", "Fairhaven", "Elmwood", "Westport", "Cedar Falls")
BRANCH_EVENTS = ("closes early", "opens late", "hosts a community day", "has extended hours",
                 "is shut for maintenance", "runs a budgeting workshop")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
TEAMS = ("Compliance", "Branch operations", "Customer support", "Mortgage desk", "Treasury",
         "IT security")
TRAININGS = ("anti-fraud", "privacy", "accessibility", "complaints handling", "data retention")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
TASKS = ("update your mailing address", "order a cheque book", "set up a standing order",
         "download tax documents", "register a new device", "change your PIN",
         "report a lost phone")
CHANNELS = ("mobile app", "web portal", "phone line", "branch kiosk")
