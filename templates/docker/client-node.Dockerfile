# rbl's Node.js client service (clients/node: cockatiel, opossum); the library is chosen by --library.
# Dependencies come from its lockfile (npm ci), without dev tools or install scripts. Build arg: NODE_IMAGE.
ARG NODE_IMAGE
FROM ${NODE_IMAGE}
WORKDIR /opt/rbl/client
COPY clients/node /opt/rbl/client
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
ENTRYPOINT ["node", "/opt/rbl/client/src/main.js"]
