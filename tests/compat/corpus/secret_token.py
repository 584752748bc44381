"""SecretManager + secret_requests (the value is masked in results here)."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.secret_managers import SecretManager


@task.with_options(secret_requests=["API_TOKEN"])
async def token_length(secrets: dict = {}):
    return len(secrets["API_TOKEN"])


@workflow
async def secret_token(ctx: ExecutionContext):
    return await token_length()


if __name__ == "__main__":
    SecretManager.current().save("API_TOKEN", "s3cr3t-value")
    print(secret_token.run().to_json())
