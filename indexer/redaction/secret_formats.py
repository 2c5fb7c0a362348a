"""The catalogue of provider token formats the privacy filter knows, as data.

Each row is one format: a literal-ish ``prefix`` and a ``body`` (a regex
character class and a length range). :mod:`memoryd.indexer.redaction.privacy` turns every
row into two rules: the token as written, and the token split by spaces
(``sk-proj-AbCd 1234 EfGh …``), which it accepts only when the pieces look
random. Keeping the formats here, apart from the matching logic, is what makes
the list easy to keep current: adding a provider is adding a row.

Formats were cross-checked against gitleaks' published rules (MIT licence,
``config/gitleaks.toml``; the ``source`` column names the rule id where one
exists) and the providers' own documentation. Lengths are deliberately a
little looser than the providers' current exact lengths, because providers
lengthen keys without notice (OpenAI's ``sk-proj-`` keys did) and a secret one
character longer than the catalogue expects must still be caught. See
``docs/security/secrets.md`` for why this table is ours and not a dependency.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenFormat:
    """``prefix`` then ``min_len``…``max_len`` characters of ``body`` (a character class without brackets).

    ``name`` is the rule name reported in findings and audit lines; ``source`` says
    where the format is documented (a gitleaks rule id or a provider's page).
    """

    name: str
    prefix: str
    body: str
    min_len: int
    max_len: int | None
    reason: str
    source: str
    needles: tuple[str, ...] = ()  # lowercase substrings one of which the text must hold; default: the literal prefix
    gate: str = ""  # instead of needles: a case-sensitive regex the text must hold (for many short prefixes)


_B62 = "A-Za-z0-9"
_URL = "A-Za-z0-9_-"
_HEX = "a-fA-F0-9"

FORMATS: tuple[TokenFormat, ...] = (
    TokenFormat("api_key", r"sk-(?:proj-|svcacct-|admin-|ant-(?:api\d\d-|admin\d\d-)?|live-|test-)?", _URL, 20, None,
                "contains an API key (sk-…)", "openai-api-key, anthropic-api-key (also DeepSeek, Moonshot)"),
    TokenFormat("aws_access_key", "A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA|IPA|3T[A-Z0-9])", "A-Z0-9", 16, 16,
                "contains an AWS access key id", "aws-access-token",
                gate="A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA|IPA|3T)"),
    TokenFormat("github_token", "gh[pousr]_", _B62, 30, None, "contains a GitHub token", "github-pat, github-oauth",
                ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    TokenFormat("github_token", "github_pat_", "A-Za-z0-9_", 22, None, "contains a GitHub token",
                "github-fine-grained-pat"),
    TokenFormat("gitlab_token", "gl(?:pat|ptt|dt|rt|cbt|oas|ft|imt|agent|soat)-", _URL, 20, None,
                "contains a GitLab token", "gitlab-pat, gitlab-ptt, gitlab-deploy-token, gitlab-rrt",
                ("glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "gloas-", "glft-", "glimt-", "glagent-", "glsoat-")),
    TokenFormat("slack_token", "xox[abposre]-", "A-Za-z0-9-", 10, None, "contains a Slack token",
                "slack-bot-token, slack-user-token"),
    TokenFormat("slack_token", "xapp-", "A-Za-z0-9-", 20, None, "contains a Slack token", "slack-app-token"),
    TokenFormat("google_api_key", "AIza", _URL, 35, 35, "contains a Google API key", "gcp-api-key"),
    TokenFormat("google_oauth_token", r"ya29\.", "A-Za-z0-9_.-", 20, None, "contains a Google OAuth access token",
                "developers.google.com/identity (ya29. access tokens)"),
    TokenFormat("google_oauth_token", "GOCSPX-", _URL, 20, None, "contains a Google OAuth client secret",
                "developers.google.com/identity (GOCSPX- client secrets)"),
    TokenFormat("stripe_key", "(?:sk|rk)_(?:live|test|prod)_", _B62, 16, None, "contains a Stripe secret key",
                "stripe-access-token", ("_live_", "_test_", "_prod_")),
    TokenFormat("stripe_key", "whsec_", _B62, 24, None, "contains a Stripe webhook signing secret",
                "docs.stripe.com/webhooks (whsec_)"),
    TokenFormat("huggingface_token", "hf_", _B62, 30, None, "contains a Hugging Face token",
                "huggingface-access-token"),
    TokenFormat("huggingface_token", "api_org_", _B62, 30, None, "contains a Hugging Face token",
                "huggingface-organization-api-token"),
    TokenFormat("groq_key", "gsk_", _B62, 40, None, "contains a Groq API key", "console.groq.com (gsk_)"),
    TokenFormat("xai_key", "xai-", _B62, 40, None, "contains an xAI API key", "docs.x.ai (xai-)"),
    TokenFormat("npm_token", "npm_", _B62, 36, None, "contains an npm access token", "npm-access-token"),
    TokenFormat("pypi_token", "pypi-AgEIcHlwaS5vcmc", _URL, 50, None, "contains a PyPI upload token",
                "pypi-upload-token"),
    TokenFormat("twilio_key", "SK", _HEX, 32, 32, "contains a Twilio API key", "twilio-api-key",
                gate="SK[0-9a-fA-F]{32}"),
    TokenFormat("perplexity_key", "pplx-", _B62, 40, None, "contains a Perplexity API key", "perplexity-api-key"),
    TokenFormat("replicate_token", "r8_", _B62, 37, None, "contains a Replicate API token",
                "replicate.com/docs (r8_)"),
    TokenFormat("notion_token", "(?:ntn_|secret_)", _B62, 43, None, "contains a Notion integration token",
                "notion-api-token", ("ntn_", "secret_")),
    TokenFormat("linear_key", "lin_api_", _B62, 40, None, "contains a Linear API key", "linear-api-key"),
    TokenFormat("digitalocean_token", "do[opr]_v1_", _HEX, 64, 64, "contains a DigitalOcean token",
                "digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token", ("_v1_",)),
    TokenFormat("shopify_token", "shp(?:at|ca|pa|ss)_", _HEX, 32, 32, "contains a Shopify token",
                "shopify-access-token, shopify-shared-secret", ("shpat_", "shpca_", "shppa_", "shpss_")),
    TokenFormat("databricks_token", "dapi", _HEX, 32, 32, "contains a Databricks token", "databricks-api-token"),
    TokenFormat("square_token", "(?:sq0atp|sq0csp|EAAA)", _URL, 22, None, "contains a Square token",
                "square-access-token", ("sq0atp", "sq0csp", "eaaa")),
    TokenFormat("alibaba_access_key", "LTAI", _B62, 12, 24, "contains an Alibaba Cloud AccessKey id",
                "alibaba-access-key-id"),
    TokenFormat("tencent_secret_id", "AKID", _B62, 32, 36, "contains a Tencent Cloud SecretId",
                "cloud.tencent.com/document (AKID…)"),
    TokenFormat("age_secret_key", "AGE-SECRET-KEY-1", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 58,
                "contains an age secret key", "age-secret-key"),
)

#: Whole-token formats that are not "prefix + one body": (name, regex, reason, source, needles).
PATTERNS: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    ("sendgrid_key", r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,50}", "contains a SendGrid API key",
     "sendgrid-api-token", ("sg.",)),
    ("jwt", r"eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,4096}", "contains a JSON Web Token",
     "jwt", ("eyj",)),
    ("slack_token", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
     "contains a Slack webhook URL", "slack-webhook-url", ("hooks.slack.com",)),
    ("telegram_bot_token", r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}", "contains a Telegram bot token",
     "telegram-bot-api-token", (":aa",)),
    ("discord_webhook", r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60,}",
     "contains a Discord webhook URL", "discord webhook", ("discord",)),
)
