# Switchboard's container image: the service (REST, MCP, the SMTP receiver, the workers) on Node 20,
# built in two stages (everything needed to compile, then only what runs) and run as an unprivileged user.
#
#   docker build -t switchboard .
#   docker run -p 3000:3000 -v switchboard-data:/app/data switchboard          # the embedded database
#   docker compose up -d                                                       # PostgreSQL, Redis, two replicas
#
# test/deploy/image.test.ts runs these very steps (each RUN, then CMD) in a clean directory, so they cannot
# rot where no container engine is at hand; docs/deploy.md says what that covers. Keep RUN steps free of
# absolute paths: the test maps the image's paths (WORKDIR, COPY, ENV) into its directory, not a shell's.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY src ./src
COPY drizzle ./drizzle
# `npm ci` builds dist/ (the prepare script); then only the runtime dependencies stay, and the data
# directory is made private (the service refuses one that others may read).
RUN npm ci --no-audit --no-fund
RUN npm prune --omit=dev --no-audit --no-fund && mkdir -m 0700 data

FROM node:20-bookworm-slim
ENV HOST=0.0.0.0 PORT=3000 DATA_DIR=/app/data
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/bin ./bin
COPY --from=build /app/drizzle ./drizzle
COPY --from=build /app/dist ./dist
COPY --from=build /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/data ./data
USER node
VOLUME /app/data
# 3000: HTTP (REST, MCP, OAuth pages, hooks); 2525: the SMTP receiver when SMTP_PORT=2525 is set.
EXPOSE 3000 2525
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "--max-semi-space-size=8", "dist/src/main.js"]
