/** `/mcp` for `/openapi.json`. */
export const mcpOpenApiPaths = {
  "/mcp": {
    post: {
      summary: "Model Context Protocol (streamable HTTP, JSON replies): every command as a tool",
      responses: { 200: { description: "JSON-RPC reply" }, 202: { description: "Notification accepted" } },
    },
    delete: {
      summary: "End an MCP session (`Mcp-Session-Id`)",
      responses: { 200: { description: "Ended" } },
    },
  },
};
